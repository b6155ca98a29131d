"""The arithmetic that explains `flowrate scaling`'s efficiency with all-reduce bandwidth."""

from __future__ import annotations

import pytest

from flowrate.campaigns.scaling.comm import (
    allreduce_config,
    gradient_bytes,
    predicted_overhead_s,
    step_time_s,
)
from flowrate.campaigns.scaling.run import CommOverhead, ScalingReport
from flowrate.cli.scaling_text import communication_lines
from flowrate.config import Precision, RunConfig


def test_gradient_bytes_are_fp32_unless_the_weights_are_bf16() -> None:
    assert gradient_bytes(1_000_000, Precision.FP32) == 4_000_000
    assert gradient_bytes(1_000_000, Precision.BF16) == 4_000_000  # autocast keeps fp32 weights
    assert gradient_bytes(1_000_000, Precision.PURE_BF16) == 2_000_000


def test_predicted_overhead_is_the_gradient_bytes_over_algbw() -> None:
    # 2 ranks: bus factor 2(n-1)/n = 1, so 100 MB at 10 GB/s busbw takes 10 ms.
    assert predicted_overhead_s(100_000_000, 10e9, 2) == pytest.approx(0.010, rel=1e-12)
    # 4 ranks: factor 1.5, so algbw = busbw / 1.5 and the same bytes take 15 ms.
    assert predicted_overhead_s(100_000_000, 10e9, 4) == pytest.approx(0.015, rel=1e-12)


def test_step_time_is_the_global_batch_over_the_summed_rate() -> None:
    assert step_time_s(64, 1600.0) == 0.04  # 2 ranks of 32 at 800 samples/s each


def test_the_allreduce_runs_at_the_gradient_size_in_whole_fp32_elements() -> None:
    study = RunConfig(problem="fc_mnist", device="cpu", threads=1, steps=10)
    config = allreduce_config(study, 4_000_002)
    assert (config.problem, config.problem_options, config.device, config.threads) == (
        "allreduce",
        {"bytes": 4_000_004},
        "cpu",
        1,
    )


def test_the_line_names_predicted_and_measured_overheads() -> None:
    report = ScalingReport("s", 1, 1, [], [CommOverhead(2, 4_000_000, 2e9, 0.002, 0.0031)])
    assert communication_lines(report) == [
        "2 processes: predicted all-reduce overhead 2 ms/step (4 MB at 2 GB/s busbw) vs measured 3.1 ms/step"
    ]
