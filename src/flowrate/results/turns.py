"""B against A over runs made in pairs that took turns: paired by pair.

Run i of A and run i of B ran at the same time in two processes that took turns interval by
interval (flowrate.campaigns.process.turns), so the machine's drift over seconds fell on both
alike, and their log ratio d_i = log B_i − log A_i carries what is left: each process's own offset
and its intervals' sampling noise. The pairs are independent of one another, so the test is the
paired t-test by design (nothing is chosen from the data): ratio exp(mean d), standard error
sd(d) / √n, t with n − 1 degrees of freedom. With one pair there is no spread to test by, and the
verdict is the unpaired one of flowrate.results.verdict (with the store's between-run noise where
it knows one). ``turns_test`` works on arrays of comparisons at once (the last axis holds one
comparison's pairs), so a simulation runs this code itself; turns_verdict wraps one comparison as
a Verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from flowrate.results.verdict import LogRatioTest, Verdict, run_level_verdict

MIN_PAIRS = 2  # one pair leaves the paired test no degree of freedom


def turns_test(a: np.ndarray, b: np.ndarray) -> LogRatioTest:
    """The paired test over pairs: ``a`` and ``b`` (…, n) hold each side's per-run values, pair i
    at index i, positive, n ≥ MIN_PAIRS; its degrees of freedom are n − 1."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.shape[-1] < MIN_PAIRS:
        raise ValueError(
            f"each side needs the same number of runs, {MIN_PAIRS} or more, got {a.shape} and {b.shape}"
        )
    n = a.shape[-1]
    d = np.log(b) - np.log(a)
    return LogRatioTest(d.mean(-1), d.std(-1, ddof=1) / math.sqrt(n), float(n - 1))


def turns_verdict(
    a: Sequence[float],
    b: Sequence[float],
    *,
    alpha: float,
    min_effect: float,
    history_cv: float | None = None,
    history_runs: int = 0,
) -> Verdict:
    """B against A over one comparison's pairs (value i of each side ran with the other's value i).
    Where the sides do not pair (different counts) or hold one pair, the unpaired verdict of
    flowrate.results.verdict, with ``history_cv`` from ``history_runs`` runs standing in for the
    spread as it says."""
    if len(a) != len(b) or len(a) < MIN_PAIRS:
        verdict = run_level_verdict(
            a, b, alpha=alpha, min_effect=min_effect, history_cv=history_cv, history_runs=history_runs
        )
        why = f"unpaired: {min(len(a), len(b))} pair{'s' if min(len(a), len(b)) != 1 else ''} that took turns"
        return replace(verdict, method=f"{verdict.method}; {why}", evidence=f"{verdict.evidence} ({why})")
    if any(not math.isfinite(v) or v <= 0 for v in (*a, *b)):
        raise ValueError("per-run values must be finite and positive")
    test = turns_test(np.array([a]), np.array([b]))
    pairs = len(a)
    method = (
        f"paired t-test of the pairs' log ratios ({pairs} pairs of processes that took turns, "
        f"{pairs - 1} degrees of freedom)"
    )
    pair_cv = float(test.se[0]) * math.sqrt(pairs)
    evidence = f"{pairs} runs a side in pairs that took turns, pair-ratio CV {pair_cv:.1%}"
    return test.verdict(alpha, min_effect, method, evidence, pairs)
