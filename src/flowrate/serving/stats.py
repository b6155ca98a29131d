"""Summaries of a latency sample: mean with a t interval, median/p90/p99 with distribution-free
intervals from order statistics (no assumption on the latency distribution, which is skewed).

Percentiles use numpy's default (linear interpolation), the method vLLM's benchmark_serving and
genai-perf both use, so figures under their definitions are comparable to theirs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

QUANTILES = {"median": 0.5, "p90": 0.9, "p99": 0.99}


def quantile_ci(sorted_values: np.ndarray, q: float, level: float = 0.95) -> list[float] | None:
    """The interval [x_(l), x_(u)] that holds the q-quantile with probability >= level, from the
    binomial law of how many samples fall below it; None when n is too small for one (p99 needs
    a few hundred samples before its upper bound exists)."""
    n = len(sorted_values)
    tail = (1 - level) / 2
    low = int(stats.binom.ppf(tail, n, q))  # 1-based rank of the lower bound
    high = int(stats.binom.ppf(1 - tail, n, q)) + 1
    if low < 1 or high > n:
        return None
    return [float(sorted_values[low - 1]), float(sorted_values[high - 1])]


def describe(values: list[float], level: float = 0.95) -> dict[str, Any] | None:
    """mean, mean_ci, median, p90, p99 and each one's ``<name>_ci``; None for an empty sample."""
    if not values:
        return None
    data = np.sort(np.asarray(values, dtype=float))
    n = len(data)
    out: dict[str, Any] = {"n": n, "mean": float(data.mean())}
    if n > 1:
        half = stats.t.ppf((1 + level) / 2, n - 1) * data.std(ddof=1) / np.sqrt(n)
        out["mean_ci"] = [out["mean"] - float(half), out["mean"] + float(half)]
    else:
        out["mean_ci"] = None
    for name, q in QUANTILES.items():
        out[name] = float(np.percentile(data, q * 100))
        out[f"{name}_ci"] = quantile_ci(data, q, level)
    return out
