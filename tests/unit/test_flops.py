"""FLOP counts and MFU: executed FLOPs from a real step, MFU against a fake device table."""

from dataclasses import replace

import pytest
import torch

from flowrate.cli.run_text import coverage_line
from flowrate.config import Mode
from flowrate.measure.flops import count_step, flops_report, flops_warnings
from flowrate.measure.op_counter import OpCount, OpTally
from flowrate.measure.peaks import DevicePeak, peak_for, registered_peaks
from flowrate.problems.base import Problem
from flowrate.problems.registry import get_problem
from flowrate.results.sections import Operators

FAKE = DevicePeak(
    name="Fake Accelerator 9000",
    match=("fake", "accelerator", "9000"),
    dense_flops={"fp32": 10e12, "bf16": 100e12},
    memory_bandwidth=2e12,
    host_link_bandwidth=50e9,
    source="Fake datasheet, https://example.com/fake-9000.pdf",
)


def test_mfu_and_hfu_against_the_table_are_exact() -> None:
    with registered_peaks(FAKE):
        report = flops_report(
            peak=peak_for("Fake Accelerator 9000", "pure-bf16"),
            samples_per_sec=500.0,
            model_flops_per_sample=60_000_000_000,
            executed_flops_per_sample=64_000_000_000.0,
        )
    assert report.model_flops_per_sec == 30e12
    assert report.hardware_flops_per_sec == 32e12
    assert report.peak_flops == 100e12
    assert report.mfu == pytest.approx(0.30)
    assert report.hfu == pytest.approx(0.32)
    assert report.reason is None
    assert report.peak_source is not None and "example.com" in report.peak_source


def test_mfu_against_a_measured_peak_sits_beside_the_datasheet_one() -> None:
    with registered_peaks(FAKE):
        report = flops_report(
            peak=peak_for("Fake Accelerator 9000", "fp32"),
            samples_per_sec=2.0,
            model_flops_per_sample=1_000_000_000_000,
            executed_flops_per_sample=None,
            measured_peak_flops=8e12,
        )
    assert report.mfu == pytest.approx(0.2)
    assert report.mfu_of_measured_peak == pytest.approx(0.25)
    assert report.hardware_flops_per_sec is None and report.hfu is None


def test_unknown_device_leaves_mfu_empty_with_the_reason() -> None:
    report = flops_report(
        peak=peak_for("Mystery Chip", "fp32"),
        samples_per_sec=10.0,
        model_flops_per_sample=100,
        executed_flops_per_sample=100.0,
    )
    assert report.mfu is None and report.hfu is None and report.peak_flops is None
    assert report.reason is not None and "Mystery Chip" in report.reason
    assert report.model_flops_per_sec == 1000.0 and report.hardware_flops_per_sec == 1000.0


def test_precision_the_device_lacks_leaves_mfu_empty() -> None:
    with registered_peaks(FAKE):
        report = flops_report(
            peak=peak_for("fake accelerator 9000", "fp16"),
            samples_per_sec=1.0,
            model_flops_per_sample=1,
            executed_flops_per_sample=1.0,
        )
    assert report.mfu is None and report.reason is not None and "fp16" in report.reason


def test_bandwidth_fraction_uses_the_link_the_kernel_moves_data_over() -> None:
    with registered_peaks(FAKE):
        memory = flops_report(
            peak=peak_for("Fake Accelerator 9000", "fp32"),
            samples_per_sec=1000.0,
            model_flops_per_sample=0,
            executed_flops_per_sample=0.0,
            bytes_per_sample=1_000_000_000,
        )
        host = flops_report(
            peak=peak_for("Fake Accelerator 9000", "fp32"),
            samples_per_sec=10.0,
            model_flops_per_sample=0,
            executed_flops_per_sample=0.0,
            bytes_per_sample=1_000_000_000,
            bandwidth_kind="host_link",
        )
    assert memory.bytes_per_sec == 1e12 and memory.bandwidth_fraction == pytest.approx(0.5)
    assert host.bytes_per_sec == 1e10 and host.bandwidth_fraction == pytest.approx(0.2)
    assert memory.mfu is None and memory.reason is not None and "memory-bound" in memory.reason


def test_executed_flops_of_a_real_training_step_match_the_analytic_count() -> None:
    problem = get_problem("fc_mnist", "debug")
    torch.manual_seed(0)
    model = problem.build_model()
    generator = torch.Generator().manual_seed(0)
    batch = problem.make_batch(6, torch.device("cpu"), generator)

    def step(b: tuple[torch.Tensor, ...]) -> torch.Tensor:
        loss = problem.loss(model, b)
        loss.backward()
        return loss.detach()

    counted = count_step(step, batch).total_flops
    assert counted == 6 * problem.flops_per_sample(Mode.TRAIN)


def counted_zoo_step(name: str, mode: Mode) -> tuple[Problem, OpTally]:
    problem = get_problem(name, "debug")
    torch.manual_seed(0)
    model = problem.build_model()
    batch = problem.make_batch(2, torch.device("cpu"), torch.Generator().manual_seed(0))
    if mode is Mode.TRAIN:
        return problem, count_step(lambda b: problem.loss(model, b).backward(), batch)
    with torch.no_grad():
        return problem, count_step(lambda b: problem.loss(model.eval(), b), batch)


def test_cpu_attention_is_counted_on_the_fused_kernel_with_the_causal_discount() -> None:
    problem, tally = counted_zoo_step("transformer", Mode.INFER)
    assert "aten._scaled_dot_product_flash_attention_for_cpu" in tally.counted_ops
    assert tally.not_counted == {}
    # the zoo's formula counts the full T x T square; the kernel skips the masked half
    assert tally.total_flops < 2 * problem.forward_flops_per_sample()
    attention = tally.flops_by_class()["attention"]
    assert (
        tally.total_flops - attention + tally.attention_full_flops == 2 * problem.forward_flops_per_sample()
    )


@pytest.mark.parametrize(
    ("name", "mode"),
    [
        ("transformer", Mode.TRAIN),
        ("bert-base", Mode.TRAIN),
        ("bert-base", Mode.INFER),
        ("resnet50", Mode.INFER),
    ],
)
def test_the_zoos_model_flops_agree_with_the_count(name: str, mode: Mode) -> None:
    problem, tally = counted_zoo_step(name, mode)
    model = problem.flops_per_sample(mode)
    assert flops_warnings(model, tally.total_flops / 2, tally, batch_size=2) == []


def test_flops_warnings_allow_two_percent_either_way() -> None:
    assert flops_warnings(100, 100.0) == []
    assert flops_warnings(102, 100.0) == [] and flops_warnings(98, 100.0) == []
    assert "3.0% above" in flops_warnings(103, 100.0)[0] and "inflated" in flops_warnings(103, 100.0)[0]
    assert "5.0% below" in flops_warnings(95, 100.0)[0]
    assert "saw no FLOPs" in flops_warnings(100, 0.0)[0]
    assert flops_warnings(0, 0.0) == [] and flops_warnings(100, None) == []


def tally_of(*ops: tuple[str, int], recomputed: int = 0, full: int = 0, kept: int = 0) -> OpTally:
    return OpTally(
        tuple(OpCount(op, ("float32",), flops, 0, 1) for op, flops in ops), {}, recomputed, full, kept
    )


def test_masks_and_attention_recompute_are_known_reasons() -> None:
    # a step of 2 samples: 100 of matmuls; attention 60 executed (20 of it recomputed in
    # backward), 80 over every pair and 40 over the pairs the masks keep, without the recompute
    tally = tally_of(
        ("aten.mm", 100),
        ("aten._scaled_dot_product_flash_attention_for_cpu", 60),
        recomputed=20,
        full=80,
        kept=40,
    )
    assert flops_warnings(80, 80.0, tally, batch_size=2) == []  # as executed
    assert flops_warnings(90, 80.0, tally, batch_size=2) == []  # attention over every pair
    assert flops_warnings(70, 80.0, tally, batch_size=2) == []  # over the pairs the masks keep
    (warning,) = flops_warnings(85, 80.0, tally, batch_size=2)  # none: the nearest reading named
    assert "5.6% below the 90 FLOP/sample counted (attention over every (query, key) pair)" in warning
    # --recompute may add up to one forward per sample
    assert flops_warnings(60, 80.0, tally_of(("aten.mm", 160)), batch_size=2, recompute_allowance=20) == []


def test_the_warning_names_the_largest_counted_ops_or_the_class_that_differs() -> None:
    tally = tally_of(("aten.mm", 150), ("aten.convolution", 50))
    (warning,) = flops_warnings(130, 100.0, tally, batch_size=2)
    assert "30.0% above" in warning
    assert "largest counted ops: aten.mm (matmul) 75%, aten.convolution (convolution) 25%" in warning
    by_class = {"matmul": 75, "convolution": 55}
    (warning,) = flops_warnings(130, 100.0, tally, batch_size=2, model_flops_by_class=by_class)
    assert "convolution differs most (model 55 FLOP/sample, counted 25 FLOP/sample)" in warning


def test_mfu_above_the_peak_is_withheld_with_the_reason() -> None:
    with registered_peaks(FAKE):
        report = flops_report(
            peak=peak_for("Fake Accelerator 9000", "fp32"),
            samples_per_sec=2.0,
            model_flops_per_sample=6_000_000_000_000,  # 12 TFLOP/s on a 10 TFLOP/s device
            executed_flops_per_sample=6e12,
        )
    assert report.mfu is None and report.hfu is None
    assert report.reason is not None and "MFU withheld" in report.reason and "120%" in report.reason
    assert report.model_flops_per_sec == 12e12  # the FLOP/s themselves stay


def test_the_coverage_line() -> None:
    operators = Operators(counted_ops=[f"aten.op{n}" for n in range(14)], not_counted={})
    assert coverage_line(operators) == "FLOPs counted over 14 ops; not counted: none"
    operators = replace(operators, not_counted={"aten.foo": 12, "aten.bar_mm": 1})
    assert coverage_line(operators) == "FLOPs counted over 14 ops; not counted: aten.bar_mm ×1, aten.foo ×12"


def test_an_overclaiming_problem_warns_and_its_mfu_is_withheld(monkeypatch: pytest.MonkeyPatch) -> None:
    import flowrate
    from flowrate.cli.run_text import summary_rows
    from flowrate.harness import run as harness_run
    from flowrate.problems.transformer import TransformerLM

    # a formula claiming a PFLOP per sample: far above the count, and above any device's peak
    monkeypatch.setattr(TransformerLM, "forward_flops_per_sample", lambda self: 10**15)
    monkeypatch.setattr(harness_run, "device_name", lambda device: "Fake Accelerator 9000")
    with registered_peaks(FAKE):
        result = flowrate.benchmark(
            "transformer", size="debug", device="cpu", steps=2, preheat_steps=1, sample_every=1
        )
    assert result.flops.mfu is None and 0 < result.flops.hfu < 1  # the counted FLOPs are fine
    assert result.flops.reason.startswith("MFU withheld: model FLOP/s would be")
    assert result.flops.reason in result.warnings
    assert [i.mfu for i in result.intervals] == [None] * len(result.intervals)
    (overclaim,) = [w for w in result.warnings if "model FLOPs" in w]
    assert (
        "above the" in overclaim
        and "MFU would be inflated; largest counted ops: aten.mm (matmul)" in overclaim
    )
    rows = dict(summary_rows(result))
    assert "MFU withheld" in rows["MFU"]
    assert rows["FLOP count"] == "FLOPs counted over 4 ops; not counted: none"
    assert result.operators is not None
    assert "aten._scaled_dot_product_flash_attention_for_cpu_backward" in result.operators.counted_ops
