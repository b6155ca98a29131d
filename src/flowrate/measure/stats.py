"""Statistics over a run's intervals, and warnings that say how to fix an unstable result.

Follows pyperf's habits: report the spread next to the centre, never a bare number, and when the
spread or the sample is poor, say so with a remedy.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any, TypedDict

import numpy as np
from scipy.special import stdtrit  # Student-t quantile; scipy.stats would cost each fresh process 0.3 s

CV_WARN = 0.10  # MEASUREMENT.md: warn at a coefficient of variation of 10% or more
MIN_INTERVAL_S = 0.1  # aim for intervals of at least 100 ms
TINY_INTERVAL_S = 0.001  # pyperf: values under 1 ms are unreliable
MIN_INTERVALS = 5
PERCENTILE_MIN_N = 20  # below this, p5/p95 are not meaningful: report min/max instead


class RateFields(TypedDict):
    """The interval statistics as RunSummary names them."""

    median_samples_per_sec: float
    mean_samples_per_sec: float
    stdev_samples_per_sec: float
    cv: float
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
        """These statistics as RunSummary's samples/s fields (median_samples_per_sec, …)."""
        return RateFields(
            median_samples_per_sec=self.median,
            mean_samples_per_sec=self.mean,
            stdev_samples_per_sec=self.stdev,
            cv=self.cv,
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


def measurement_warnings(rates: Summary, interval_seconds: list[float]) -> list[str]:
    """Human warnings about the quality of a measurement, each with a remedy."""
    warnings = []
    if rates.n < MIN_INTERVALS:
        warnings.append(
            f"only {rates.n} interval(s) measured: the spread is poorly known; "
            "measure longer with --duration or more --steps"
        )
    if rates.n > 1 and rates.cv >= CV_WARN:
        warnings.append(
            f"unstable: intervals vary with a coefficient of variation of {rates.cv:.1%} "
            f"(>= {CV_WARN:.0%}); close other programs, fix the thread count with --threads, "
            "raise --preheat, or measure longer with --duration"
        )
    typical = statistics.median(interval_seconds) if interval_seconds else 0.0
    if typical < TINY_INTERVAL_S:
        warnings.append(
            f"intervals are far too short ({typical * 1e3:.3f} ms median, under 1 ms): "
            "timer resolution dominates; raise --sample-every"
        )
    elif typical < MIN_INTERVAL_S:
        warnings.append(
            f"intervals are short ({typical * 1e3:.1f} ms median, under 100 ms): the sync at each "
            "sample point weighs on them; raise --sample-every or use the automatic setting"
        )
    return warnings
