"""Statistics over intervals and the warnings that come with them."""

import math

import pytest

from flowrate.measure.stats import measurement_warnings, summarize


def test_summary_of_known_values() -> None:
    s = summarize([10.0, 12.0, 14.0, 16.0])
    assert s.n == 4
    assert s.mean == 13.0
    assert s.median == 13.0
    assert s.stdev == pytest.approx(math.sqrt(20 / 3))  # sample stdev, n - 1
    assert s.cv == pytest.approx(math.sqrt(20 / 3) / 13)
    assert (s.min, s.max) == (10.0, 16.0)
    assert s.p5 is None and s.p95 is None  # too few values for percentiles
    # Student t, 3 degrees of freedom: t_0.975 = 3.182446305
    half = 3.182446305284263 * math.sqrt(20 / 3) / 2
    assert s.ci95_low == pytest.approx(13 - half)
    assert s.ci95_high == pytest.approx(13 + half)


def test_percentiles_with_enough_values() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    s = summarize(values)
    assert s.p5 == pytest.approx(5.95)  # numpy's linear interpolation
    assert s.p95 == pytest.approx(95.05)


def test_single_value_has_no_spread() -> None:
    s = summarize([7.0])
    assert (s.stdev, s.cv, s.ci95_low, s.ci95_high) == (0.0, 0.0, None, None)
    with pytest.raises(ValueError):
        summarize([])


def test_stable_long_run_has_no_warnings() -> None:
    s = summarize([100.0, 101.0, 99.0, 100.0, 100.5, 99.5])
    assert measurement_warnings(s, [0.2] * 6) == []


def test_warnings_name_the_problem_and_the_remedy() -> None:
    unstable = summarize([100.0, 150.0, 60.0])
    warnings = measurement_warnings(unstable, [0.05, 0.05, 0.05])
    assert len(warnings) == 3
    few, spread, short = warnings
    assert "only 3 interval(s)" in few and "--duration" in few
    assert "coefficient of variation" in spread and "--threads" in spread
    assert "under 100 ms" in short and "--sample-every" in short
    tiny = measurement_warnings(summarize([1.0] * 10), [0.0005] * 10)
    assert tiny == [tiny[0]] and "under 1 ms" in tiny[0]
