"""Every result carries FLOPs, energy and memory; TensorBoard files equal the record; checkpoints.

The energy test drives a fake RAPL powercap tree from inside a real run: each sample point adds
exactly one joule to the package counter, so the run's joules are known exactly.
"""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import flowrate
from flowrate.config import RunConfig
from flowrate.execution.checkpoint import load_checkpoint
from flowrate.harness import run as harness_run
from flowrate.harness.api import measured_gemm_peak
from flowrate.measure.energy import open_energy_meter
from flowrate.problems.registry import get_problem
from flowrate.results.schema import SCHEMA_VERSION, IntervalRecord, Result
from flowrate.results.sections import Flops
from flowrate.results.tensorboard import scalars

TINY = dict(size="debug", device="cpu", preheat_steps=1, steps=12, sample_every=3)


def read_events(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    events = EventAccumulator(str(logdir))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def expected_events(intervals: list[IntervalRecord]) -> dict[str, list[tuple[int, float]]]:
    """What the record says each tag should hold, rounded to the float32 TensorBoard stores."""
    out: dict[str, list[tuple[int, float]]] = {}
    for record in intervals:
        for tag, value in scalars(record).items():
            out.setdefault(tag, []).append((record.first_step + record.steps, float(np.float32(value))))
    return out


def test_tensorboard_event_files_equal_the_result_record(tmp_path: Path) -> None:
    result = flowrate.benchmark(
        "transformer",
        tensorboard=tmp_path / "tb",
        checkpoint_every=6,
        checkpoint_dir=str(tmp_path / "ck"),
        **TINY,
    )
    events = read_events(tmp_path / "tb")
    assert events == expected_events(result.intervals)
    compute = [i for i in result.intervals if i.kind == "compute"]
    # the Cerebras tags, one value per compute interval, at the step count reached
    assert [step for step, _ in events["local_samples_per_sec"]] == [3, 6, 9, 12]
    last = compute[-1]
    assert events["avg_samples_per_sec"][-1][1] == pytest.approx(last.global_samples_per_sec, rel=1e-6)
    assert events["avg_steps_per_sec"][-1][1] == pytest.approx(
        last.global_samples_per_sec / result.batch_size, rel=1e-6
    )
    assert events["local_samples_per_sec"][-1][1] == pytest.approx(last.rate_samples_per_sec, rel=1e-6)
    assert [v for _, v in events["loss"]] == pytest.approx(
        [float(np.mean(result.losses[i : i + 3])) for i in range(0, 12, 3)], rel=1e-6
    )
    assert "process_rss_bytes" in events and "checkpoint_s" in events
    assert "mfu" not in events  # no datasheet peak for this CPU: nothing is made up


def test_the_cli_writes_tensorboard_files(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli(
        "run", "--size", "debug", "--steps", "6", "--sample-every", "2", "--preheat", "1",
        "--tensorboard", str(tmp_path / "tb"), "--json",
    )  # fmt: skip
    assert outcome.code == 0, outcome.stderr
    result = Result.from_json(outcome.stdout)
    assert read_events(tmp_path / "tb") == expected_events(result.intervals)


def test_checkpoints_are_written_loadable_and_accounted(tmp_path: Path) -> None:
    result = flowrate.benchmark("fc_mnist", checkpoint_every=4, checkpoint_dir=str(tmp_path / "ck"), **TINY)
    files = sorted(p.name for p in (tmp_path / "ck").iterdir())
    assert files == ["step-00000004.pt", "step-00000008.pt"]
    kinds = [(i.kind, i.after_checkpoint) for i in result.intervals]
    assert kinds.count(("checkpoint", False)) == 2
    after = [i for i in result.intervals if i.after_checkpoint]
    assert [i.first_step for i in after] == [4, 8]
    s = result.summary
    compute = [i for i in result.intervals if i.kind == "compute"]
    saves = [i for i in result.intervals if i.kind == "checkpoint"]
    assert s.checkpoints == 2 and s.intervals == len(compute) and s.timed_steps == 12
    assert s.checkpoint_s == pytest.approx(sum(i.seconds for i in saves))
    assert s.checkpoint_overhead == pytest.approx(s.checkpoint_s / s.timed_duration_s)
    assert s.compute_samples_per_sec == pytest.approx(s.timed_samples / sum(i.seconds for i in compute))
    assert s.samples_per_sec < s.compute_samples_per_sec  # checkpoints cost time as experienced
    assert any("checkpoint(s) took" in w for w in result.warnings)
    # weights_only loading restores a fresh model exactly
    problem = get_problem("fc_mnist", "debug")
    model = problem.build_model()
    optimizer = torch.optim.AdamW(model.parameters())
    assert load_checkpoint(tmp_path / "ck" / "step-00000008.pt", model, optimizer) == 8
    saved = torch.load(tmp_path / "ck" / "step-00000008.pt", weights_only=True)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, saved["model"][name])
    assert optimizer.state_dict()["state"]


def test_energy_from_a_fake_rapl_tree_gives_exact_samples_per_joule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    (zone / "name").write_text("package-0\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")
    counter = {"uj": 1_000_000}
    (zone / "energy_uj").write_text(f"{counter['uj']}\n")

    def one_joule_per_sample_point(record: IntervalRecord) -> None:
        counter["uj"] += 1_000_000
        (zone / "energy_uj").write_text(f"{counter['uj']}\n")

    monkeypatch.setattr(
        harness_run,
        "open_energy_meter",
        lambda device, clock: open_energy_meter(device, powercap_root=tmp_path, clock=clock),
    )
    result = flowrate.benchmark("fc_mnist", on_interval=one_joule_per_sample_point, **TINY)
    energy = result.energy
    assert energy.method == "rapl-powercap" and energy.domains == ["package-0"]
    assert energy.joules == pytest.approx(4.0)  # four sample points
    assert energy.samples_per_joule == pytest.approx(result.summary.timed_samples / 4.0)
    flops = result.summary.timed_samples * result.problem.model_flops_per_sample
    assert energy.flops_per_joule == pytest.approx(flops / 4.0)
    assert energy.average_watts == pytest.approx(4.0 / energy.seconds)


def test_every_result_has_flops_energy_and_memory_and_round_trips(tmp_path: Path) -> None:
    result = flowrate.benchmark("transformer", **TINY)
    assert result.schema_version == SCHEMA_VERSION
    f = result.flops
    ops = result.operators
    assert (
        ops is not None
        and ops.not_counted == {}
        and f.executed_flops_per_sample == ops.flops / ops.batch_size
    )
    # the zoo's formula counts attention over the full T x T square (the fused kernel skips the
    # causal half and recomputes Q·Kᵀ in backward)
    attention = sum(o.flops for o in ops.ops if "attention" in o.op)
    full = (ops.flops - attention + ops.attention_full_flops) / ops.batch_size
    assert full == pytest.approx(result.problem.model_flops_per_sample, rel=0.01)
    assert [w for w in result.warnings if "FLOP" in w] == []
    assert f.hardware_flops_per_sec == pytest.approx(
        f.executed_flops_per_sample * result.summary.samples_per_sec
    )
    assert f.mfu is None and "no datasheet peak" in f.reason
    assert result.energy.joules is None or result.energy.method
    if result.energy.joules is None:
        assert result.energy.reason
    assert result.memory.process_peak_rss_bytes > 0
    assert all(i.process_rss_bytes for i in result.intervals)
    path = tmp_path / "r.json"
    result.save(path)
    assert Result.load(path) == result


def test_a_version_1_result_still_reads(tmp_path: Path) -> None:
    data = json.loads(flowrate.benchmark("fc_mnist", **TINY).to_json())
    data["schema_version"] = 1
    for key in ("flops", "energy", "memory", "repeat", "fidelity"):
        data.pop(key)
    for interval in data["intervals"]:
        for key in ("after_checkpoint", "loss", "mfu", "power_w", "model_flops_per_sec"):
            interval.pop(key)
    for key in ("compute_samples_per_sec", "checkpoints", "checkpoint_s", "checkpoint_overhead"):
        data["summary"].pop(key)
    old = Result.from_dict(data)
    assert (
        old.flops == Flops()
        and old.flops.mfu is None
        and old.summary.checkpoints == 0
        and old.intervals[0].loss is None
    )


def test_measure_peak_reports_mfu_against_a_measured_gemm() -> None:
    result = flowrate.benchmark("fc_mnist", measure_peak=True, **TINY)
    f = result.flops
    assert f.measured_peak_flops is not None and f.model_flops_per_sec is not None
    assert f.measured_peak_flops > 1e9  # any CPU of this decade does a GFLOP/s of fp32 GEMM
    assert f.mfu_of_measured_peak == pytest.approx(f.model_flops_per_sec / f.measured_peak_flops)
    assert f.mfu is None  # the datasheet one stays empty with its reason


def test_measure_peak_of_an_int8_weights_run_times_its_fp32_matmuls() -> None:
    # int8 weights are dequantized into the fp32 activations' matmuls: the GEMM runs fp32 (issue 40.2)
    result = flowrate.benchmark("fc_mnist", precision="int8-weights", measure_peak=True, threads=1, **TINY)
    f = result.flops
    assert result.config.precision == "int8-weights"
    assert f.measured_peak_flops is not None and f.model_flops_per_sec is not None
    assert f.measured_peak_flops > 1e9
    assert f.mfu_of_measured_peak == pytest.approx(f.model_flops_per_sec / f.measured_peak_flops)


def test_measure_peak_of_an_int8_dynamic_run_is_empty_and_says_why() -> None:
    result = flowrate.benchmark("fc_mnist", precision="int8-dynamic", measure_peak=True, threads=1, **TINY)
    assert result.flops.measured_peak_flops is None and result.flops.mfu_of_measured_peak is None
    assert (
        "--measure-peak: no measured peak for int8-dynamic: the GEMM benchmark has no int8 x int8 "
        "matmul, and one in another format would not be this run's peak"
    ) in result.warnings


def test_measure_peak_of_an_fp8_run_is_not_a_bf16_gemm() -> None:
    why = measured_gemm_peak(RunConfig(precision="fp8", device="cuda"), torch.device("cuda", 0))
    assert why == (
        "--measure-peak: no measured peak for fp8: the GEMM benchmark has no fp8 matmul, and one in "
        "another format would not be this run's peak"
    )


def test_mfu_end_to_end_with_a_fake_device_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flowrate.cli.run_text import summary_rows
    from flowrate.measure.peaks import DevicePeak, registered_peaks

    fake = DevicePeak(
        name="Fake Accelerator 9000",
        match=("fake", "accelerator", "9000"),
        dense_flops={"fp32": 10e12},
        memory_bandwidth=2e12,
        host_link_bandwidth=None,
        source="Fake datasheet, https://example.com/fake.pdf",
    )
    monkeypatch.setattr(harness_run, "device_name", lambda device: "Fake Accelerator 9000")
    with registered_peaks(fake):
        result = flowrate.benchmark("transformer", tensorboard=tmp_path / "tb", **TINY)
    f = result.flops
    assert f.peak_flops == 10e12 and "example.com" in f.peak_source
    assert f.mfu == pytest.approx(f.model_flops_per_sec / 10e12)
    assert f.hfu == pytest.approx(f.hardware_flops_per_sec / 10e12)
    for interval in result.intervals:
        assert interval.mfu == pytest.approx(interval.model_flops_per_sec / 10e12)
    assert [v for _, v in read_events(tmp_path / "tb")["mfu"]] == [
        float(np.float32(i.mfu)) for i in result.intervals
    ]
    rows = dict(summary_rows(result))
    assert rows["MFU"].startswith(f"{f.mfu:.1%} of 10 TFLOP/s dense datasheet peak")
