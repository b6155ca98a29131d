"""Is B faster than A? A verdict over runs, with the process as the unit: pure statistics.

Intervals of one process share that process's offset (memory layout, autotuned kernels, clocks,
neighbours), so they are not independent draws: with m intervals and intraclass correlation ρ
the variance of their mean is 1 + (m − 1)ρ times what pooling assumes. Here each run (each
process) contributes one value — its median interval rate, or a figure it measured once — and
the spread between runs is the noise.

The ratio B/A of the sides' means is tested on the log scale (delta method): the standard error
of log(B/A) is √(s_A²/(n_A·x̄_A²) + s_B²/(n_B·x̄_B²)), with Welch–Satterthwaite degrees of
freedom; the interval is exp(± t·se) around the ratio, and p is the two-sided t probability of
log(B/A)/se, so the interval excludes 1 exactly when p < alpha. With too few runs to know the
spread (a side under MIN_OWN_RUNS), a between-run CV the store measured for this configuration on
this machine (flowrate.results.noise) stands in for it — never below what the runs themselves
show — and the verdict says so. One run a side and no history: no verdict, and how to get one.

With enough runs a side and a history too, the two estimates of the same between-run variance are
pooled (weighted by their degrees of freedom, as a pooled two-sample t-test pools its groups):
three runs a side alone leave 4 degrees of freedom (t₀.₉₇₅ = 2.78), pooled with 40 earlier runs
43 (2.02), which is most of the power a 3-runs-a-side comparison can have. Pooling assumes today's
runs are as noisy as the earlier ones; when their own spread is larger than the history's at the
POOL_F_LEVEL of an F-test, the runs are judged by their own spread alone (and the verdict says so).

A difference is called only when significant (p < alpha) and at least ``min_effect``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import fdtri, ndtr, ndtri, stdtr, stdtrit

from flowrate.measure.stats import DEFAULT_ALPHA, mann_whitney

DEFAULT_MIN_EFFECT = 0.01
TESTS = ("welch", "mannwhitney")
# with fewer runs than this on a side, a known between-run CV from history is preferred
MIN_OWN_RUNS = 3
# today's runs noisier than the history by more than this F-test's quantile: not pooled with it
POOL_F_LEVEL = 0.9
FASTER, SLOWER, SAME, UNKNOWN = "faster", "slower", "same", "unknown"


@dataclass(frozen=True)
class Verdict:
    """B against A over per-run values. ratio, ci_low and ci_high are NaN where unknown."""

    ratio: float  # mean B / mean A of the per-run values
    ci_low: float  # (1 − alpha) interval of the ratio
    ci_high: float
    p_value: float | None
    significant: bool  # p < alpha and |ratio − 1| ≥ min_effect
    direction: str  # "faster" (B higher), "slower", "same" (not called) or "unknown" (no test)
    method: str  # how: "Welch over per-run values", …
    evidence: str  # what it rests on: "3 runs a side, between-run CV 1.9%"
    runs_a: int
    runs_b: int
    noise_source: str | None  # "runs" (their own spread), "history" (the store's), "runs+history"


@dataclass(frozen=True)
class LogRatioTest:
    """A t-test of log(B/A) over arrays of comparisons at once (a simulation runs the same code):
    each comparison's log ratio, its standard error and degrees of freedom."""

    log_ratio: np.ndarray
    se: np.ndarray
    df: np.ndarray | float

    def p_values(self) -> np.ndarray:
        """Two-sided; 1 where the standard error is 0 and the ratio 1, else 0 where it is 0."""
        t = np.abs(self.log_ratio) / np.where(self.se > 0, self.se, np.inf)
        p = 2 * stdtr(self.df, -t)
        return np.where(self.se > 0, p, np.where(self.log_ratio == 0, 1.0, 0.0))

    def interval(self, alpha: float) -> tuple[np.ndarray, np.ndarray]:
        """The (1 − alpha) interval of B/A."""
        half = stdtrit(self.df, 1 - alpha / 2) * self.se
        return np.exp(self.log_ratio - half), np.exp(self.log_ratio + half)

    def verdict(self, alpha: float, min_effect: float, method: str, evidence: str, runs: int) -> Verdict:
        """The first comparison's Verdict (``runs`` a side): called where p < alpha and B/A differs
        from 1 by ``min_effect`` or more."""
        ratio = math.exp(float(self.log_ratio[0]))
        low, high = (float(x[0]) for x in self.interval(alpha))
        p = float(self.p_values()[0])
        significant = p < alpha and abs(ratio - 1) >= min_effect and ratio != 1
        direction = (FASTER if ratio > 1 else SLOWER) if significant else SAME
        return Verdict(ratio, low, high, p, significant, direction, method, evidence, runs, runs, "runs")


@dataclass(frozen=True)
class _LogRatio:
    ratio: float
    se: float  # standard error of log(ratio)
    df: float  # inf: known noise (normal)
    cv: float  # the between-run CV the standard error was built from


def _own(a: Sequence[float], b: Sequence[float]) -> _LogRatio:
    """log(B/A) with its standard error from the runs' own spread (each side ≥ 2 runs)."""
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    qa = statistics.variance(a) / (len(a) * ma * ma)
    qb = statistics.variance(b) / (len(b) * mb * mb)
    se2 = qa + qb
    denominator = qa * qa / (len(a) - 1) + qb * qb / (len(b) - 1)
    df = se2 * se2 / denominator if denominator > 0 else math.inf
    pooled = (qa * len(a) * (len(a) - 1) + qb * len(b) * (len(b) - 1)) / (len(a) + len(b) - 2)
    return _LogRatio(mb / ma, math.sqrt(se2), df, math.sqrt(pooled))


def _known(a: Sequence[float], b: Sequence[float], cv: float, df: float) -> _LogRatio:
    """log(B/A) with its standard error from a known between-run CV."""
    ratio = statistics.fmean(b) / statistics.fmean(a)
    return _LogRatio(ratio, cv * math.sqrt(1 / len(a) + 1 / len(b)), df, cv)


def _check(a: Sequence[float], b: Sequence[float]) -> None:
    if not a or not b:
        raise ValueError("each side needs at least one run's value")
    if any(not math.isfinite(v) or v <= 0 for v in (*a, *b)):
        raise ValueError("per-run values must be finite and positive")


def ratio_ci(a: Sequence[float], b: Sequence[float], *, level: float) -> tuple[float, float]:
    """The ``level`` confidence interval of mean(B)/mean(A) from the runs' own spread (≥ 2 a
    side): for sequential stopping (keep adding pairs until it is narrow enough)."""
    _check(a, b)
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"a ratio interval needs 2 runs or more a side, got {len(a)} and {len(b)}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie between 0 and 1, got {level}")
    return _interval(_own(a, b), 1 - level)


def _interval(lr: _LogRatio, alpha: float) -> tuple[float, float]:
    if lr.se == 0:
        return lr.ratio, lr.ratio
    half = float(stdtrit(lr.df, 1 - alpha / 2)) * lr.se if math.isfinite(lr.df) else _z(alpha) * lr.se
    return lr.ratio * math.exp(-half), lr.ratio * math.exp(half)


def _z(alpha: float) -> float:
    return float(ndtri(1 - alpha / 2))


def _p(lr: _LogRatio) -> float:
    if lr.se == 0:
        return 1.0 if lr.ratio == 1 else 0.0
    t = abs(math.log(lr.ratio)) / lr.se
    if not math.isfinite(lr.df):
        return float(2 * ndtr(-t))
    return float(2 * stdtr(lr.df, -t))


def run_level_verdict(
    a: Sequence[float],
    b: Sequence[float],
    *,
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    history_cv: float | None = None,
    history_runs: int = 0,
    test: str = "welch",
) -> Verdict:
    """B against A, one value per run on each side (each run's median samples/s, or its figure).

    ``history_cv``: the between-run CV the store knows for this configuration on this machine,
    from ``history_runs`` runs; used when a side has fewer than MIN_OWN_RUNS runs. ``test``:
    "welch" (the log-ratio t-test above) or "mannwhitney" (its p from the Mann–Whitney U test
    over the runs' values; the interval stays the t one; with the history's spread it is the
    t-test, as ranks cannot use a known spread).
    """
    _check(a, b)
    if test not in TESTS:
        raise ValueError(f"test must be one of {TESTS}, got {test!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie between 0 and 1, got {alpha}")
    if history_cv is not None and not (math.isfinite(history_cv) and history_cv >= 0):
        raise ValueError(f"history_cv must be a finite CV ≥ 0, got {history_cv}")
    na, nb = len(a), len(b)
    few = min(na, nb) < MIN_OWN_RUNS
    own = _own(a, b) if min(na, nb) >= 2 else None
    if history_cv is not None and (few or own is None):
        cv = max(history_cv, own.cv) if own is not None else history_cv
        df = float(history_runs - 1) if history_runs > 1 else math.inf
        lr, source = _known(a, b, cv, df), "history"
        earlier = f"{history_runs} earlier runs of this configuration on this machine"
        evidence = f"{_runs(na, nb)}, between-run CV {cv:.1%} from {earlier}"
        if own is not None and own.cv > history_cv:
            evidence = (
                f"{_runs(na, nb)}, between-run CV {cv:.1%} (their own: above the {history_cv:.1%} of "
                f"{earlier})"
            )
    elif (
        own is not None
        and history_cv is not None
        and history_runs > 1
        and test == "welch"  # ranks cannot use a known spread
        and _poolable(own, na + nb - 2, history_cv, history_runs - 1)
    ):
        own_df, history_df = na + nb - 2, history_runs - 1
        cv = math.sqrt((own_df * own.cv**2 + history_df * history_cv**2) / (own_df + history_df))
        lr, source = _known(a, b, cv, float(own_df + history_df)), "runs+history"
        evidence = (
            f"{_runs(na, nb)}, between-run CV {cv:.1%}: their own {own.cv:.1%} pooled with the "
            f"{history_cv:.1%} of {history_runs} earlier runs of this configuration on this machine"
        )
    elif own is not None:
        lr, source = own, "runs"
        evidence = f"{_runs(na, nb)}, between-run CV {own.cv:.1%}"
        if history_cv is not None and history_runs > 1 and test == "welch":
            evidence += f" (above the {history_cv:.1%} of {history_runs} earlier runs: not pooled with them)"
    else:
        ratio = statistics.fmean(b) / statistics.fmean(a)
        evidence = (
            f"{_runs(na, nb)}: no spread between runs to judge by; record {MIN_OWN_RUNS} or more runs "
            f"of each side's configuration (`flowrate run --repeat {MIN_OWN_RUNS}` does it in one command)"
        )
        return Verdict(ratio, math.nan, math.nan, None, False, UNKNOWN, "none", evidence, na, nb, None)
    low, high = _interval(lr, alpha)
    if test == "mannwhitney" and source == "runs":
        p, method = mann_whitney(a, b)[1], "Mann–Whitney over per-run values"
    else:
        p = _p(lr)
        method = "t-test of the log ratio, " + _NOISE_METHODS[source]
    method += " (one value per process)"
    significant = p < alpha and abs(lr.ratio - 1) >= min_effect and lr.ratio != 1
    direction = (FASTER if lr.ratio > 1 else SLOWER) if significant else SAME
    return Verdict(lr.ratio, low, high, p, significant, direction, method, evidence, na, nb, source)


_NOISE_METHODS = {"history": "known between-run CV", "runs+history": "pooled between-run CV", "runs": "Welch"}


def _poolable(own: _LogRatio, own_df: int, history_cv: float, history_df: int) -> bool:
    """Whether today's runs are no noisier than the history, at the POOL_F_LEVEL of an F-test."""
    if history_cv == 0:
        return own.cv == 0
    return bool(own.cv**2 / history_cv**2 <= fdtri(own_df, history_df, POOL_F_LEVEL))


def _runs(na: int, nb: int) -> str:
    if na == nb:
        return f"{na} run{'s' if na != 1 else ''} a side"
    return f"{na} run{'s' if na != 1 else ''} of A, {nb} of B"
