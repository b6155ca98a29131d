"""Statistics over intervals, the warnings that come with them, and the tests of significance.

tests/fixtures/compare/welch_cases.json holds data sets with their Welch and Mann–Whitney answers.
"""

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest
import scipy.stats

from flowrate.measure.stats import mann_whitney, measurement_warnings, summarize, welch

FIXTURES = Path(__file__).parents[1] / "fixtures" / "compare"
CASES = json.loads((FIXTURES / "welch_cases.json").read_text())["cases"]


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
    automatic = measurement_warnings(unstable, [0.05, 0.05, 0.05], sample_every_set=False)[2]
    assert "--sample-every" not in automatic and "more --steps" in automatic
    tiny = measurement_warnings(summarize([1.0] * 10), [0.0005] * 10)
    assert tiny == [tiny[0]] and "under 1 ms" in tiny[0]


def test_welch_by_hand() -> None:
    # A = 100, 200, 300 (mean 200, variance 10000); B = 400, 600, 800 (mean 600, variance 40000)
    # se² = 10000/3 + 40000/3 = 50000/3; t = 400 / se; df = se⁴ / ((10000/3)²/2 + (40000/3)²/2) = 50/17
    w = welch([100, 200, 300], [400, 600, 800])
    se = math.sqrt(50000 / 3)
    assert w.difference == 400
    assert w.standard_error == pytest.approx(se, rel=1e-12)
    assert w.t == pytest.approx(3.098386676965933, rel=1e-12)
    assert w.df == pytest.approx(50 / 17, rel=1e-12)
    assert w.p_value == pytest.approx(0.05478676604107645, rel=1e-9)  # just above 0.05: n is 3
    half = scipy.stats.t.ppf(0.975, 50 / 17) * se
    assert half == pytest.approx(415.5399503182504, rel=1e-9)
    assert (w.ci_low, w.ci_high) == pytest.approx((400 - half, 400 + half), rel=1e-12)
    # the interval follows alpha
    w90 = welch([100, 200, 300], [400, 600, 800], alpha=0.10)
    assert w90.ci_low > w.ci_low and w90.ci_high < w.ci_high and w90.ci_low > 0  # p < 0.10


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_welch_and_mann_whitney_on_known_cases(case: dict[str, Any]) -> None:
    a, b, expected = case["a"], case["b"], case["welch"]
    w = welch(a, b)
    # the textbook formula, written out again
    qa, qb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    df = (qa + qb) ** 2 / (qa**2 / (len(a) - 1) + qb**2 / (len(b) - 1))
    t = (statistics.fmean(b) - statistics.fmean(a)) / math.sqrt(qa + qb)
    assert w.t == pytest.approx(t, rel=1e-12) == pytest.approx(expected["t"], rel=1e-9)
    assert w.df == pytest.approx(df, rel=1e-12) == pytest.approx(expected["df"], rel=1e-9)
    assert w.p_value == pytest.approx(expected["p"], rel=1e-9)
    assert w.p_value == pytest.approx(scipy.stats.ttest_ind(b, a, equal_var=False).pvalue, rel=1e-9)
    assert (w.ci_low, w.ci_high) == pytest.approx((expected["ci95_low"], expected["ci95_high"]), rel=1e-9)
    u, p = mann_whitney(a, b)
    assert (u, p) == pytest.approx((case["mann_whitney"]["u_of_b"], case["mann_whitney"]["p"]), rel=1e-9)


def test_mann_whitney_by_hand() -> None:
    # B above A in every pair: U of B = n_A·n_B; exact two-sided p = 2 / C(n_A + n_B, n_A)
    assert mann_whitney([1, 2, 3], [4, 5, 6]) == pytest.approx((9.0, 2 / 20))
    assert mann_whitney([1, 2, 3, 4], [5, 6, 7, 8]) == pytest.approx((16.0, 2 / 70))
    assert mann_whitney([4, 5, 6], [1, 2, 3]) == pytest.approx((0.0, 2 / 20))
    # everything tied: no evidence at all (scipy alone would divide 0 by 0)
    assert mann_whitney([5.0] * 4, [5.0] * 6) == (12.0, 1.0)


def test_welch_with_zero_variance() -> None:
    same = welch([7.0] * 5, [7.0] * 4)
    assert (same.p_value, same.df, same.t, same.ci_low, same.ci_high) == (1.0, None, None, 0.0, 0.0)
    apart = welch([7.0] * 5, [8.0] * 4)
    assert (apart.p_value, apart.ci_low, apart.ci_high, apart.difference) == (0.0, 1.0, 1.0, 1.0)
    # one side constant: the other side carries all the variance and all the degrees of freedom
    one = welch([10.0, 10.0, 10.0], [11.0, 12.0, 13.0, 14.0])
    assert one.df == pytest.approx(3.0)
    assert one.p_value == pytest.approx(scipy.stats.ttest_1samp([11, 12, 13, 14], 10.0).pvalue)
    with pytest.raises(ValueError, match="2 values or more"):
        welch([1.0], [1.0, 2.0])
