"""Statistics over a run's intervals, warnings that say how to fix an unstable result, and the
tests of significance that compare two sets of samples (Welch's t-test, Mann–Whitney U).

Follows pyperf's habits: report the spread next to the centre, never a bare number, and when the
spread or the sample is poor, say so with a remedy.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypedDict

import numpy as np
from scipy.special import stdtrit  # Student-t quantile; scipy.stats would cost each fresh process 0.3 s

CV_WARN = 0.10  # MEASUREMENT.md: warn at a coefficient of variation of 10% or more
MIN_INTERVAL_S = 0.1  # aim for intervals of at least 100 ms
TINY_INTERVAL_S = 0.001  # pyperf: values under 1 ms are unreliable
MIN_INTERVALS = 5
PERCENTILE_MIN_N = 20  # below this, p5/p95 are not meaningful: report min/max instead
DEFAULT_ALPHA = 0.05  # significance level of the tests, and 1 − the confidence of their interval


class RateFields(TypedDict):
    """The interval statistics as RunSummary names them."""

    median_samples_per_sec: float
    mean_samples_per_sec: float
    stdev_samples_per_sec: float | None  # None: one interval, whose spread is unknown
    cv: float | None  # None: one interval, or a mean of 0 (a spread relative to nothing)
    min_samples_per_sec: float
    max_samples_per_sec: float
    p5_samples_per_sec: float | None
    p95_samples_per_sec: float | None
    ci95_low_samples_per_sec: float | None
    ci95_high_samples_per_sec: float | None


@dataclass(frozen=True)
class Summary:
    """Distribution of one metric over intervals. p5/p95 are None for fewer than 20 values."""

    n: int
    median: float
    mean: float
    stdev: float
    cv: float
    min: float
    max: float
    p5: float | None
    p95: float | None
    ci95_low: float | None  # Student-t 95% confidence interval of the mean
    ci95_high: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def rate_fields(self) -> RateFields:
        """These statistics as RunSummary's samples/s fields (median_samples_per_sec, …); the spread
        of a single interval is unknown (None), not 0."""
        known = self.n > 1
        return RateFields(
            median_samples_per_sec=self.median,
            mean_samples_per_sec=self.mean,
            stdev_samples_per_sec=self.stdev if known else None,
            cv=self.cv if known and math.isfinite(self.cv) else None,
            min_samples_per_sec=self.min,
            max_samples_per_sec=self.max,
            p5_samples_per_sec=self.p5,
            p95_samples_per_sec=self.p95,
            ci95_low_samples_per_sec=self.ci95_low,
            ci95_high_samples_per_sec=self.ci95_high,
        )


def summarize(values: list[float]) -> Summary:
    if not values:
        raise ValueError("summarize() needs at least one value")
    n = len(values)
    mean = statistics.fmean(values)
    stdev = statistics.stdev(values) if n > 1 else 0.0
    p5 = p95 = low = high = None
    if n >= PERCENTILE_MIN_N:
        p5, p95 = (float(v) for v in np.percentile(values, [5, 95]))
    if n > 1:
        half = float(stdtrit(n - 1, 0.975)) * stdev / math.sqrt(n)
        low, high = mean - half, mean + half
    return Summary(
        n=n,
        median=statistics.median(values),
        mean=mean,
        stdev=stdev,
        cv=stdev / mean if mean else math.inf,
        min=min(values),
        max=max(values),
        p5=p5,
        p95=p95,
        ci95_low=low,
        ci95_high=high,
    )


def measurement_warnings(
    rates: Summary, interval_durations_s: list[float], sample_every_set: bool = True
) -> list[str]:
    """Human warnings about the quality of a measurement, each with a remedy. ``sample_every_set``:
    whether the user chose the sample interval (--sample-every); where the automatic setting chose
    it, short intervals come from a timed window too short to hold longer ones."""
    found = []
    if rates.n < MIN_INTERVALS:
        found.append(
            f"only {rates.n} interval(s) measured: the spread is poorly known; "
            "measure longer with --duration or more --steps"
        )
    if rates.n > 1 and rates.cv >= CV_WARN:
        found.append(
            f"unstable: intervals vary with a coefficient of variation of {rates.cv:.1%} "
            f"(>= {CV_WARN:.0%}); close other programs, fix the thread count with --threads, "
            "raise --preheat, or measure longer with --duration"
        )
    typical = statistics.median(interval_durations_s) if interval_durations_s else 0.0
    if typical < TINY_INTERVAL_S:
        found.append(
            f"intervals are far too short ({typical * 1e3:.3f} ms median, under 1 ms): "
            "timer resolution dominates; raise --sample-every"
        )
    elif typical < MIN_INTERVAL_S:
        remedy = (
            "raise --sample-every or use the automatic setting"
            if sample_every_set
            else "the timed steps are too few for longer ones: measure longer with --duration or more --steps"
        )
        found.append(
            f"intervals are short ({typical * 1e3:.1f} ms median, under 100 ms): the sync at each "
            f"sample point weighs on them; {remedy}"
        )
    return found


@dataclass(frozen=True)
class Welch:
    """Welch's t-test of mean(B) − mean(A), and its confidence interval.

    ``df`` and ``t`` are None when both sides have zero variance: then p is 1 for equal means
    and 0 for different ones, and the interval is the difference itself.
    """

    difference: float
    standard_error: float
    df: float | None
    t: float | None
    p_value: float
    ci_low: float
    ci_high: float


def welch(a: Sequence[float], b: Sequence[float], alpha: float = DEFAULT_ALPHA) -> Welch:
    """Welch's unequal-variance t-test of B against A, with the (1 − alpha) interval of B − A.

    Welch–Satterthwaite degrees of freedom; two-sided p. Each side needs 2 values or more.
    """
    from scipy import stats as scipy_stats  # loaded on use: fresh run processes never need it

    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        raise ValueError(f"Welch's test needs 2 values or more on each side, got {na} and {nb}")
    difference = statistics.fmean(b) - statistics.fmean(a)
    qa = statistics.variance(a) / na
    qb = statistics.variance(b) / nb
    se2 = qa + qb
    if se2 == 0:  # both sides constant: no noise at all, so any difference is certain
        return Welch(difference, 0.0, None, None, 1.0 if difference == 0 else 0.0, difference, difference)
    se = math.sqrt(se2)
    denominator = qa**2 / (na - 1) + qb**2 / (nb - 1)
    df = se2**2 / denominator if denominator > 0 else math.inf  # underflow: as good as normal
    t = difference / se
    p = float(2 * scipy_stats.t.sf(abs(t), df))
    half = float(scipy_stats.t.ppf(1 - alpha / 2, df)) * se
    return Welch(
        difference, se, df if math.isfinite(df) else None, t, p, difference - half, difference + half
    )


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann–Whitney U test: (U of B, p). U of B counts the pairs where B's value is the
    larger (ties count one half); scipy chooses the exact distribution for small samples without
    ties, the normal approximation with tie correction otherwise."""
    from scipy import stats as scipy_stats

    if not a or not b:
        raise ValueError("the Mann–Whitney test needs a value on each side")
    if min(a) == max(a) == min(b) == max(b):  # all tied: no evidence either way (scipy: 0/0)
        return len(a) * len(b) / 2, 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = scipy_stats.mannwhitneyu(b, a, alternative="two-sided")
    return float(result.statistic), float(result.pvalue)
