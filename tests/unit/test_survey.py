"""The survey's figures, bands, band files and text, its stored record, and MFU against a stored
survey's matmul maximum: exact values from fake figures and fake measurements, no clock."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from factories import make_result
from flowrate.analysis.compare_recorded import Judging, SurveyComparison, compare_recorded, compare_surveys
from flowrate.analysis.survey_card import render_card
from flowrate.analysis.survey_values import FigurePair, paired
from flowrate.cli.run_text import summary_rows
from flowrate.cli.runs_text import show_rows
from flowrate.cli.survey_text import (
    comparison_dict,
    comparison_notes,
    comparison_table,
    figure_line,
    markdown,
    outside_message,
    progress_line,
    start_line,
    survey_rows,
)
from flowrate.config import RunConfig
from flowrate.errors import ConfigError, FlowrateError
from flowrate.execution.launch import Launch
from flowrate.harness.generate import GenerateConfig
from flowrate.harness.measured_max import against_survey
from flowrate.harness.survey import (
    SurveyConfig,
    check_launch,
    device_precisions,
    matmul_max,
    run_survey,
    survey_machine,
)
from flowrate.harness.survey_bands import (
    FRACTION_BAND,
    LAUNCH_BAND,
    PAGEABLE_BAND,
    check_bands,
    default_band,
    load_bands,
    make_figure,
    outside,
)
from flowrate.harness.survey_figures import LINKS, KernelFigures, Timing
from flowrate.results.configs import config_from
from flowrate.results.environment import CpuInfo, Environment, environment_from
from flowrate.results.schema import Result
from flowrate.results.sections import Energy, Flops, Generation, Kind, Survey
from flowrate.results.store import Store, StoredRun


def test_a_figure_with_a_datasheet_is_held_to_its_fraction() -> None:
    figure = make_figure("matmul bf16", 750e12, "FLOP/s", datasheet=1000e12, band=FRACTION_BAND)
    assert (figure.fraction, figure.within_band) == (0.75, True)
    low = make_figure("matmul bf16", 250e12, "FLOP/s", datasheet=1000e12, band=FRACTION_BAND)
    assert (low.fraction, low.within_band) == (0.25, False)
    assert outside([figure, low]) == [low]


def test_a_figure_without_a_datasheet_is_held_to_its_value() -> None:
    fast = make_figure("launch", 5e-6, "s", band=LAUNCH_BAND)
    slow = make_figure("launch", 1e-3, "s", band=LAUNCH_BAND)
    assert (fast.fraction, fast.within_band, slow.within_band) == (None, True, False)
    empty = make_figure("h2d pinned", None, "B/s", reason="needs CUDA", band=FRACTION_BAND)
    assert (empty.within_band, empty.reason) == (None, "needs CUDA")
    assert outside([empty]) == []


def test_default_bands() -> None:
    assert default_band("matmul fp32", has_datasheet=True) == (0.3, 1.0)
    assert default_band("matmul fp32", has_datasheet=False) is None  # no datasheet: nothing to hold it to
    assert default_band("h2d pinned", has_datasheet=True) == (0.3, 1.0)
    assert default_band("train transformer/gpt2", has_datasheet=True) == (0.05, 1.0)
    assert default_band("launch to completion", has_datasheet=False) == LAUNCH_BAND
    assert default_band("attention bf16", has_datasheet=True) == (0.1, 1.0)
    assert default_band("h2d pageable", has_datasheet=True) == (0.05, 1.0)
    assert default_band("duplex pinned", has_datasheet=True) == (0.3, 1.0)
    assert default_band("infer transformer/gpt2", has_datasheet=True) == (0.05, 1.0)
    assert default_band("power", has_datasheet=True) == (0.05, 1.05)
    assert default_band("generate transformer/gpt2", has_datasheet=False) is None


def test_band_file(tmp_path: Path) -> None:
    path = tmp_path / "bands.json"
    path.write_text(json.dumps({"matmul fp32": [1e9, 1e15], "launch": [0, 1]}))
    assert load_bands(path) == {"matmul fp32": (1e9, 1e15), "launch": (0.0, 1.0)}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"copy": [2, 1]}', "'copy' must be [low, high]"),
        ('{"copy": [1]}', "'copy' must be [low, high]"),
        ('{"copy": ["a", 2]}', "'copy' must be [low, high]"),
        ('{"copy": [true, 2]}', "'copy' must be [low, high]"),
    ],
)
def test_a_malformed_band_file_is_refused_naming_the_entry(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "bands.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match="bands") as error:
        load_bands(path)
    assert says in str(error.value)


def test_check_bands_accepts_an_empty_object() -> None:
    assert check_bands({}) == {}


def _fake_measure(seen: list[RunConfig]):  # type: ignore[no-untyped-def]
    """A measurement that runs nothing: the gemm's FLOP/s is m (so the search's best is known), the
    attention's 7; bytes/s 2e9; the training step draws 150 W under a 300 W power limit."""

    def measure(config: RunConfig) -> Result:
        seen.append(config)
        environment = {"device": {"type": "cuda", "name": "X", "power_limit_w": 300.0}}
        result = make_result(100.0, problem=config.problem, environment=environment)
        options = config.problem_options or {}
        rate = float(options.get("m", 7))
        flops = Flops(model_flops_per_sec=rate, bytes_per_sec=2e9, model_flops_per_sample=1)
        summary = dataclasses.replace(result.summary, model_flops_per_sec=rate)
        energy = Energy(joules=75.0, seconds=0.5, average_watts=150.0, method="nvml", domains=["gpu0"])
        return dataclasses.replace(result, flops=flops, summary=summary, energy=energy)

    return measure


def _fake_generate(seen: list[GenerateConfig]):  # type: ignore[no-untyped-def]
    """A generation that runs nothing: 250 decode tokens/s at 0.4 of the memory bandwidth."""

    def generate(config: GenerateConfig) -> Result:
        seen.append(config)
        section = Generation(decode_tokens_per_sec=250.0, decode_bandwidth_utilization=0.4)
        return dataclasses.replace(make_result(1.0), kind=Kind.GENERATE, generation=section)

    return generate


def test_survey_searches_shapes_and_keeps_the_maximum_on_a_device_the_table_does_not_know() -> None:
    seen: list[RunConfig] = []
    generated: list[GenerateConfig] = []
    config = SurveyConfig(device="cpu", seconds=0.1, shapes=((64, 8, 8), (256, 8, 8), (128, 8, 8)))
    result = run_survey(config, measure=_fake_measure(seen), generate=_fake_generate(generated))
    survey = result.survey
    assert survey is not None and result.kind is Kind.SURVEY
    figures = {f.name: f for f in survey.figures}
    assert list(figures) == [
        "matmul fp32",
        "matmul bf16",
        "attention fp32",
        "attention bf16",
        "copy",
        "h2d pinned",
        "d2h pinned",
        "h2d pageable",
        "d2h pageable",
        "duplex pinned",
        "launch",
        "allreduce busbw",
        "train fc_mnist/default",
        "infer fc_mnist/default",
        "generate transformer/debug",
        "power",
    ]
    matmul = figures["matmul fp32"]
    assert (matmul.value, matmul.detail) == (256.0, "best of 3 shapes: 256x8x8 (m x n x k)")
    assert matmul_max(survey, "fp32") == 256.0 and matmul_max(survey, "fp16") is None
    # a device the peak table does not know: figures shown, fractions empty with the reason
    assert matmul.datasheet is None and matmul.fraction is None and matmul.within_band is None
    assert matmul.reason is not None and "no datasheet peak" in matmul.reason
    attention = figures["attention fp32"]
    assert attention.value == 7.0
    assert attention.detail == (
        "forward, 1x8x512x64 (batch x heads x seq x head_dim), 0.03 of the matmul fp32 max"
    )
    assert figures["h2d pinned"].value is None and "CUDA" in (figures["h2d pinned"].reason or "")
    assert figures["duplex pinned"].value is None and "CUDA" in (figures["duplex pinned"].reason or "")
    spread = make_result(100.0).summary.cv  # each measurement's own spread comes with its figure
    assert spread is not None and spread > 0
    assert [figures[n].cv for n in ("matmul fp32", "attention fp32", "copy", "launch")] == [spread] * 4
    assert figures["train fc_mnist/default"].cv == spread
    assert figures["launch"].value == pytest.approx(0.01)  # 1 / 100 calls per second
    assert figures["launch"].within_band is False  # 10 ms per call: outside [0.2 µs, 500 µs]
    assert figures["allreduce busbw"].value is None
    assert figures["allreduce busbw"].reason == (
        "collectives run under torchrun: `torchrun --nproc-per-node N -m flowrate survey`"
    )
    assert [(c.problem, c.mode.value) for c in seen if c.problem == "fc_mnist"] == [
        ("fc_mnist", "train"),
        ("fc_mnist", "infer"),
    ]
    # a kernel is warm after a call or two; a model's step takes `flowrate run`'s own preheat
    assert {c.preheat_steps for c in seen if c.problem != "fc_mnist"} == {2}
    assert {c.preheat_steps for c in seen if c.problem == "fc_mnist"} == {RunConfig.preheat_steps} == {5}
    generate = figures["generate transformer/debug"]
    assert (generate.value, generate.unit, generate.datasheet) == (250.0, "tokens/s", None)
    assert generate.detail == ("decode, batch 1, prompt 8, 16 new tokens, fp32, 0.40 of memory bandwidth")
    assert [(g.problem, g.size, g.duration_s) for g in generated] == [("transformer", "debug", 0.1)]
    power = figures["power"]  # the training step's meter, against the power limit
    assert (power.value, power.datasheet, power.fraction, power.within_band) == (150.0, 300.0, 0.5, True)
    assert power.detail == "75 J over 0.5 s of train fc_mnist/default, nvml (gpu0)"
    assert {c.problem for c in seen} == {"gemm", "attention", "copy", "launch", "fc_mnist"}
    assert all(c.duration_s == 0.1 and c.device == "cpu" for c in seen)


def test_a_gpus_kernel_steps_last_5_ms_at_the_datasheet_rate_and_attention_tf32_is_held_to_fp32() -> None:
    # one 256 MiB copy a step measured 1.2 of an H200's 4.2 TB/s (the loop's own time per step);
    # SDPA computes fp32 without TF32, so the tf32 peak is out of its kernel's reach
    seen: list[RunConfig] = []
    timing = Timing(torch.device("cuda"), "NVIDIA H100 80GB HBM3", 0.1, True, None, {})
    kernels = KernelFigures(timing, _fake_measure(seen))
    kernels.copy()  # 512 MiB moved a call, 3.35 TB/s: 31.2 calls in 5 ms
    kernels.matmul("bf16", ((8192, 8192, 8192),))  # 1.1 TFLOP a call, 989.4 TFLOP/s: 4.5 calls
    tf32, fp32 = kernels.attention("tf32", None), kernels.attention("fp32", None)  # 0.27 TFLOP, 67
    assert [(c.problem, c.batch_size) for c in seen] == [
        ("copy", 32),
        ("gemm", 5),
        ("attention", 2),
        ("attention", 2),
    ]
    assert tf32.datasheet == fp32.datasheet == 67e12
    assert tf32.detail is not None and tf32.detail.endswith("held to the fp32 peak")
    unknown = KernelFigures(Timing(torch.device("cuda"), "a GPU", 0.1, True, None, {}), _fake_measure(seen))
    unknown.copy()  # at 10 TB/s: 93.1
    assert seen[-1].batch_size == 94
    cpu = KernelFigures(Timing(torch.device("cpu"), "cpu", 0.1, True, None, {}), _fake_measure(seen))
    cpu.copy()
    cpu.matmul("fp32", ((64, 64, 64),))
    assert [c.batch_size for c in seen[-2:]] == [1, 1]


def test_the_host_link_on_a_gpu_the_table_knows() -> None:
    """Pinned and pageable copies against the link's rate per direction, duplex against both."""
    seen: list[RunConfig] = []
    timing = Timing(torch.device("cuda"), "NVIDIA H100 80GB HBM3", 0.1, True, None, {})
    kernels = KernelFigures(timing, _fake_measure(seen))
    figures = [kernels.link(problem, pinned) for problem, pinned in LINKS]
    assert [(c.problem, c.problem_options) for c in seen] == [
        ("h2d", {"mib": 256, "pinned": 1}),
        ("d2h", {"mib": 256, "pinned": 1}),
        ("h2d", {"mib": 256, "pinned": 0}),
        ("d2h", {"mib": 256, "pinned": 0}),
        ("duplex", {"mib": 256, "pinned": 1}),
    ]
    assert [f.datasheet for f in figures] == [63e9, 63e9, 63e9, 63e9, 126e9]
    assert [(f.band_low, f.band_high) for f in figures] == [
        FRACTION_BAND,
        FRACTION_BAND,
        PAGEABLE_BAND,
        PAGEABLE_BAND,
        FRACTION_BAND,
    ]
    duplex = figures[-1]  # 2 GB/s of 126 GB/s: a link trained far below its width
    assert duplex.fraction == pytest.approx(2e9 / 126e9) and duplex.within_band is False
    assert duplex.detail == "256 MiB each way, both directions at once"


@pytest.mark.parametrize(
    ("method", "seconds", "watts", "within"),
    [
        ("nvml-energy-counter", 0.25, 1.2 * 700, True),  # the counter's step: up to 0.1 / 0.25 above
        ("nvml-energy-counter", 0.25, 1.5 * 700, False),  # beyond 1.05 x 1.4
        ("nvml-energy-counter", 2.0, 1.2 * 700, False),  # a long window: 1.05 x 1.05
        ("nvml-power-sampled", 0.25, 1.2 * 700, False),  # sampled power does not step
    ],
)
def test_the_power_band_allows_for_the_nvml_counters_step_over_a_short_window(
    method: str, seconds: float, watts: float, within: bool
) -> None:
    def measure(config: RunConfig) -> Result:
        result = _fake_measure([])(config)
        energy = Energy(joules=watts * seconds, seconds=seconds, average_watts=watts, method=method)
        device = {"type": "cuda", "name": "X", "power_limit_w": 700.0}
        return dataclasses.replace(result, energy=energy, environment=environment_from({"device": device}))

    config = SurveyConfig(device="cpu", seconds=0.1, shapes=((64, 8, 8),), precisions=("fp32",))
    result = run_survey(config, measure=measure, generate=_fake_generate([]))
    assert result.survey is not None
    power = result.survey.figures[-1]
    assert (power.name, power.datasheet, power.within_band) == ("power", 700.0, within)


def test_power_says_which_counter_is_missing() -> None:
    def measure(config: RunConfig) -> Result:
        result = _fake_measure([])(config)
        reason = "/sys/class/powercap has no RAPL zones (common in VMs and containers)"
        return dataclasses.replace(result, energy=Energy(reason=reason))

    config = SurveyConfig(device="cpu", seconds=0.1, shapes=((64, 8, 8),), precisions=("fp32",))
    result = run_survey(config, measure=measure, generate=_fake_generate([]))
    assert result.survey is not None
    power = result.survey.figures[-1]
    assert (power.name, power.value, power.within_band) == ("power", None, None)
    assert power.reason == "/sys/class/powercap has no RAPL zones (common in VMs and containers)"


def test_without_the_model_the_survey_has_no_model_figures() -> None:
    config = SurveyConfig(device="cpu", seconds=0.1, shapes=((64, 8, 8),), precisions=("fp32",), model=False)
    result = run_survey(config, measure=_fake_measure([]), generate=_fake_generate([]))
    assert result.survey is not None
    assert result.survey.figures[-1].name == "allreduce busbw"


def test_a_band_given_by_name_replaces_the_default() -> None:
    config = SurveyConfig(
        device="cpu", seconds=0.1, shapes=((64, 8, 8),), model=False, bands={"launch": (0.0, 1.0)}
    )
    result = run_survey(config, measure=_fake_measure([]), generate=_fake_generate([]))
    assert result.survey is not None
    launch = next(f for f in result.survey.figures if f.name == "launch")
    assert (launch.band_low, launch.band_high, launch.within_band) == (0.0, 1.0, True)


def test_a_finished_survey_names_the_figures_outside_their_band() -> None:
    config = SurveyConfig(device="cpu", seconds=0.1, shapes=((64, 8, 8),), precisions=("fp32",), model=False)
    heard: list[str] = []
    done = survey_machine(
        config,
        on_figure=lambda figure: heard.append(figure.name),
        measure=_fake_measure([]),
        generate=_fake_generate([]),
    )
    assert done.survey is done.result.survey and heard == [f.name for f in done.survey.figures]
    assert [f.name for f in done.outside] == ["launch"]  # 10 ms per call: outside [0.2 µs, 500 µs]
    relaxed = dataclasses.replace(config, bands={"launch": (0.0, 1.0)})
    assert survey_machine(relaxed, measure=_fake_measure([]), generate=_fake_generate([])).outside == ()


def test_under_torchrun_a_flag_choosing_the_devices_own_figures_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    check_launch(("fp32",), ((64, 8, 8),), model=False)  # alone: every option applies
    for name, value in {
        "RANK": "0",
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "1",
    }.items():
        monkeypatch.setenv(name, value)
    check_launch((), (), model=True)
    for given, flag in [
        ((("fp32",), ((64, 8, 8),), False), "precision"),
        (((), ((64, 8, 8),), False), "shapes"),
        (((), (), False), "no-model"),
    ]:
        with pytest.raises(ConfigError) as error:
            check_launch(*given)
        assert (
            str(error.value)
            == f"{flag}: applies without torchrun (under it the survey measures the collectives)"
        )


SURVEY = Survey(
    device="NVIDIA H100 80GB HBM3",
    quick=True,
    seconds_per_measurement=0.5,
    figures=[
        make_figure(
            "matmul bf16", 791e12, "FLOP/s", datasheet=989e12, band=FRACTION_BAND, detail="8192 cube"
        ),
        make_figure("launch", 2.5e-6, "s", band=LAUNCH_BAND),
        make_figure("h2d pinned", None, "B/s", reason="needs CUDA"),
    ],
)


def test_survey_text() -> None:
    assert survey_rows(SURVEY) == [
        (
            "matmul bf16",
            "791 TFLOP/s  0.80 of 989 TFLOP/s datasheet  band [0.3, 1] of datasheet: ok  (8192 cube)",
        ),
        ("launch", "2.5 µs  band [0.2, 500] µs: ok"),
        ("h2d pinned", "— (needs CUDA)"),
        ("survey", "NVIDIA H100 80GB HBM3, quick, 0.5 s per measurement"),
    ]
    low = make_figure("copy", 0.5e12, "B/s", datasheet=3.35e12, band=FRACTION_BAND)
    assert figure_line(low) == "500 GB/s  0.15 of 3.35 TB/s datasheet  band [0.3, 1] of datasheet: OUTSIDE"
    assert outside_message([low]) == (
        "--strict: 1 figure(s) outside their band: copy 500 GB/s outside [0.3, 1] of datasheet"
    )
    assert progress_line(low) == "copy: 500 GB/s"
    assert start_line(None, quick=True) == "surveying this machine (quick)"
    assert start_line(Launch(0, 4, 0, None), quick=False) == "surveying the collectives of 4 ranks"


def _survey_record(environment: Environment) -> Result:
    base = dataclasses.replace(make_result(1.0), environment=environment)
    return dataclasses.replace(
        base,
        kind=Kind.SURVEY,
        survey=SURVEY,
        run_id="5urvey000001",
        config=config_from(Kind.SURVEY, {"problem": "survey"}),
    )


def test_a_survey_round_trips_through_the_store_and_shows(tmp_path: Path) -> None:
    record = _survey_record(make_result(1.0).environment)
    with Store(tmp_path / "s.db") as store:
        store.add(record)
        back = store.get(record.run_id).result
    assert back.kind is Kind.SURVEY and back.survey == SURVEY
    assert Result.from_json(record.to_json()) == back
    rows = dict(show_rows(back, ()))
    assert rows["matmul bf16"].startswith("791 TFLOP/s  0.80 of 989 TFLOP/s datasheet")


def test_mfu_against_a_survey_of_the_same_machine() -> None:
    run = make_result(10.0, precision="bf16", mfu=0.1)
    flops = dataclasses.replace(
        run.flops, model_flops_per_sample=10**9, model_flops_per_sec=395.5e12, measured_peak_flops=None
    )
    run = dataclasses.replace(run, flops=flops)
    survey = _survey_record(run.environment)
    other = dataclasses.replace(
        survey,
        run_id="0ther0000001",
        environment=dataclasses.replace(run.environment, cpu=CpuInfo(model="X")),
    )
    mine = against_survey(run, [other, survey])
    assert mine.flops.measured_peak_flops == 791e12
    assert mine.flops.mfu_of_measured_peak == pytest.approx(0.5)
    assert mine.flops.measured_peak_source == "survey 5urvey000001"
    assert "50.0% of 791 TFLOP/s measured max (survey 5urvey000001)" in dict(summary_rows(mine))["MFU"]
    assert against_survey(run, [other]) == run  # another machine's survey is not this machine's
    fp32 = dataclasses.replace(run, config=dataclasses.replace(run.config, precision="fp32"))
    assert against_survey(fp32, [survey]) == fp32  # the survey has no fp32 matmul
    measured = dataclasses.replace(run, flops=dataclasses.replace(flops, measured_peak_flops=1e15))
    assert against_survey(measured, [survey]) == measured  # --measure-peak ran: its GEMM stands


def test_two_surveys_pair_row_by_row_with_the_ratio() -> None:
    other = Survey(
        device="NVIDIA H200",
        figures=[
            make_figure("launch", 5e-6, "s", band=LAUNCH_BAND),
            make_figure("matmul bf16", 870.1e12, "FLOP/s", datasheet=989e12),
            make_figure("copy", 4.1e12, "B/s"),
        ],
    )
    pairs = paired(SURVEY, other)
    assert [(p.name, p.ratio) for p in pairs] == [
        ("matmul bf16", pytest.approx(1.1)),
        ("launch", pytest.approx(2.0)),
        ("h2d pinned", None),  # A has no value, B no row
        ("copy", None),  # only B has it
    ]
    header, rows = comparison_table(pairs, (SURVEY, other), ("aaaa", "bbbb"))
    assert header == ["figure", "NVIDIA H100 80GB HBM3 (aaaa)", "NVIDIA H200 (bbbb)", "B/A", "within spread"]
    assert rows == [
        ["matmul bf16", "791 TFLOP/s", "870 TFLOP/s", "1.1", "—"],  # no spread recorded
        ["launch", "2.5 µs", "5 µs", "2", "—"],
        ["h2d pinned", "—", "—", "—", "—"],
        ["copy", "—", "4.1 TB/s", "—", "—"],
    ]
    assert markdown(["figure", "A"], [["a|b", "1 µs"]]) == "| figure | A |\n|---|---|\n| a\\|b | 1 µs |"
    assert comparison_notes(SURVEY, other)[2] == (
        "the surveys were timed differently (A: quick, 0.5 s each; B: 0 s each)"
    )
    assert comparison_dict(pairs, ("aaaa", "bbbb"))["figures"][1] == {
        "name": "launch",
        "unit": "s",
        "a": 2.5e-6,
        "b": 5e-6,
        "ratio": pytest.approx(2.0),
        "within_spread": None,
    }


def test_two_surveys_agree_within_twice_their_combined_spread() -> None:
    """|B/A - 1| <= 2 sqrt(cv_A² + cv_B²): with CVs of 3% and 4%, within 10%."""
    a = make_figure("copy", 100.0, "B/s", cv=0.03)
    near = FigurePair("copy", "B/s", a, make_figure("copy", 109.9, "B/s", cv=0.04))
    far = FigurePair("copy", "B/s", a, make_figure("copy", 110.1, "B/s", cv=0.04))
    slower = FigurePair("copy", "B/s", a, make_figure("copy", 90.1, "B/s", cv=0.04))
    unknown = FigurePair("copy", "B/s", a, make_figure("copy", 100.0, "B/s"))
    assert [p.within_spread for p in (near, far, slower, unknown)] == [True, False, True, None]
    assert figure_line(a) == "100 B/s (CV 3.0%)"


def test_a_survey_is_compared_with_a_survey_only() -> None:
    survey = _survey_record(make_result(1.0).environment)
    run = make_result(1.0)
    with pytest.raises(ConfigError, match="surveys are compared with surveys only: B holds run records"):
        compare_surveys([survey], [run], ("A", "B"))
    with pytest.raises(ConfigError, match="A names 2 surveys: name one survey a side"):
        compare_surveys([survey, survey], [survey], ("A", "B"))


def test_two_recorded_surveys_are_paired_figure_by_figure(tmp_path: Path) -> None:
    a = _survey_record(make_result(1.0).environment)
    b = dataclasses.replace(a, run_id="5urvey000002")
    tagged = [StoredRun.from_result(a)], [StoredRun.from_result(b)]
    compared = compare_recorded(tmp_path / "absent.db", *tagged, ("A", "B"), Judging())
    assert isinstance(compared, SurveyComparison)
    assert compared.run_ids == ("5urvey000001", "5urvey000002")
    assert compared.pairs == paired(SURVEY, SURVEY)


def test_the_survey_card_escapes_and_marks_the_figures_outside_their_band() -> None:
    hostile = dataclasses.replace(
        SURVEY,
        device="<script>alert(1)</script>",
        figures=[
            *SURVEY.figures,
            make_figure("copy", 0.5e12, "B/s", datasheet=3.35e12, band=FRACTION_BAND, detail="<b>x</b>"),
        ],
    )
    record = dataclasses.replace(_survey_record(make_result(1.0).environment), survey=hostile)
    page = render_card(record)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert page.count('<tr class="outside">') == 1  # the copy at 0.15 of its datasheet
    assert '<span class="bar" style="width:80px"></span>0.80' in page  # matmul bf16
    assert '<span class="bar off" style="width:15px"></span>0.15' in page
    assert "<dt>outside their band</dt><dd>1</dd>" in page
    assert "<dt>figures</dt><dd>3 of 4 measured</dd>" in page
    with pytest.raises(FlowrateError, match="is not a survey"):
        render_card(make_result(1.0))


def test_under_torchrun_the_survey_measures_the_allreduce_busbw(monkeypatch: pytest.MonkeyPatch) -> None:
    """busbw = algbw x 2(n-1)/n, algbw the merged bytes/s over the ranks (nccl-tests' definitions)."""
    launch = {"RANK": "0", "WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    for name, value in launch.items():
        monkeypatch.setenv(name, value)
    seen: list[RunConfig] = []
    config = SurveyConfig(device="cpu", quick=True, seconds=0.1)
    result = run_survey(config, measure=_fake_measure(seen), generate=_fake_generate([]))
    assert result.survey is not None
    [figure] = result.survey.figures  # the device's own figures would be summed over the ranks
    assert [(c.problem, c.problem_options, c.device) for c in seen] == [
        ("allreduce", {"bytes": 2**24}, "cpu")
    ]
    assert (figure.name, figure.value, figure.unit) == ("allreduce busbw", 2e9 / 4 * 1.5, "B/s")
    assert figure.detail == "16 MiB a call, 4 ranks (?), algbw 500 MB/s"
    assert figure.datasheet is None and figure.reason is not None and "no datasheet value" in figure.reason


AMPERE = ("fp32", "tf32", "bf16", "fp16")


@pytest.mark.parametrize(
    ("capability", "precisions"), [((9, 0), AMPERE), ((8, 0), AMPERE), ((7, 0), ("fp32", "fp16"))]
)
def test_a_gpu_before_ampere_is_surveyed_without_bf16_or_tf32(
    monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], precisions: tuple[str, ...]
) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    assert device_precisions(torch.device("cuda", 0)) == precisions
    assert device_precisions(torch.device("cpu")) == ("fp32", "bf16")
