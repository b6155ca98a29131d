"""FLOP counts and MFU: executed FLOPs from a real step, MFU against a fake device table."""

import pytest
import torch

from flowrate.config import Mode
from flowrate.measure.flops import count_step_flops, flops_report, flops_warnings
from flowrate.measure.peaks import DevicePeak, peak_for, registered_peaks
from flowrate.problems.registry import get_problem

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

    counted = count_step_flops(step, batch, torch.device("cpu"))
    assert counted == 6 * problem.flops_per_sample(Mode.TRAIN)


def test_cpu_attention_is_counted_through_the_math_kernel() -> None:
    problem = get_problem("transformer", "debug")
    model = problem.build_model().eval()
    batch = problem.make_batch(2, torch.device("cpu"), torch.Generator().manual_seed(0))
    with torch.no_grad():
        counted = count_step_flops(lambda b: problem.loss(model, b), batch, torch.device("cpu"))
    assert counted == 2 * problem.forward_flops_per_sample()


def test_flops_warnings() -> None:
    assert flops_warnings(100, 100.0) == []
    assert flops_warnings(50, 100.0) == []  # causal kernels count half their square: no warning
    assert "exceed" in flops_warnings(110, 100.0)[0]
    assert "saw no FLOPs" in flops_warnings(100, 0.0)[0]
    assert flops_warnings(0, 0.0) == [] and flops_warnings(100, None) == []
