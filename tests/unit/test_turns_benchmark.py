"""benchmarks/turns.py's reading of pairs: the spread of their log ratios and of their values."""

from __future__ import annotations

import math
import statistics

import pytest

from benchmark_scripts import load_benchmark


def test_a_drift_both_processes_of_a_pair_share_leaves_the_ratio_steady() -> None:
    turns = load_benchmark("turns")
    drift = [100.0, 120.0, 90.0, 110.0]  # the machine's speed at each pair
    a = [d * 1.00 for d in drift]
    b = [d * f for d, f in zip(drift, (1.01, 0.99, 1.01, 0.99), strict=True)]
    read = turns.pair_noise(a, b)
    ratios = [math.log(f) for f in (1.01, 0.99, 1.01, 0.99)]
    assert read.ratio_cv == pytest.approx(statistics.stdev(ratios), rel=1e-12)
    assert read.mean_log_ratio == pytest.approx(statistics.fmean(ratios), abs=1e-15)
    values = a + b
    assert read.between_cv == pytest.approx(statistics.stdev(values) / statistics.fmean(values), rel=1e-12)
    assert read.between_cv > 9 * read.ratio_cv  # the drift is in the values, not in the ratios
