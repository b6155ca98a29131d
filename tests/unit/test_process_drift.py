"""benchmarks/process_drift.py's reading of processes in run order: the lag-one correlation and the
paired against the unpaired standard error."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmark_scripts import load_benchmark


def test_the_lag_one_correlation_is_the_usual_estimator() -> None:
    drift = load_benchmark("process_drift")
    # centred -1.5, -0.5, 0.5, 1.5: products 0.75, -0.25, 0.75 over squares 5
    assert drift.lag_one(np.array([1.0, 2.0, 3.0, 4.0])) == pytest.approx(0.25)
    assert drift.lag_one(np.array([1.0, -1.0, 1.0, -1.0])) == pytest.approx(-0.75)


def test_a_linear_drift_cancels_in_the_blocks_and_not_in_the_unpaired_test() -> None:
    drift = load_benchmark("process_drift")
    values = [100.0 * math.exp(0.01 * i) for i in range(16)]  # 1% faster every process
    read = drift.analyse(values)
    assert read.paired_se == pytest.approx(0.0, abs=1e-12)  # A B B A: (x1 + x2 − x0 − x3) / 2 = 0
    assert read.unpaired_se > 0.02 and read.correlation > 0.5
    assert read.paired  # the blocks spread far more than a side's two runs in one block differ


def test_independent_values_are_not_paired_and_their_standard_errors_agree() -> None:
    drift = load_benchmark("process_drift")
    rng = np.random.default_rng(3)
    values = list(100.0 * np.exp(0.03 * rng.standard_normal(400)))
    read = drift.analyse(values)
    assert abs(read.correlation) < 0.15
    assert read.paired_se == pytest.approx(read.unpaired_se, rel=0.2)
    assert read.between_cv == pytest.approx(0.03, rel=0.15)
