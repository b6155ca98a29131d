"""benchmarks/aa.py's measured slowdown: the geometric mean of the A/B comparisons' B/A and its t
interval."""

from __future__ import annotations

import math
import statistics

import pytest
from scipy.special import stdtrit

from benchmark_scripts import load_benchmark


def test_the_measured_slowdown_is_the_geometric_mean_of_the_ratios_with_a_t_interval() -> None:
    aa = load_benchmark("aa")
    ratios = [0.8, 0.95, 1.0]
    ratio, low, high = aa.measured_ratio(ratios)
    assert ratio == pytest.approx((0.8 * 0.95 * 1.0) ** (1 / 3))  # not the median, 0.95
    logs = [math.log(r) for r in ratios]
    half = float(stdtrit(2, 0.975)) * statistics.stdev(logs) / math.sqrt(3)
    assert low == pytest.approx(ratio * math.exp(-half))
    assert high == pytest.approx(ratio * math.exp(half))
    same, low, high = aa.measured_ratio([0.95] * 5)
    assert same == low == high == pytest.approx(0.95)
