"""B against A over runs made in A B B A blocks: paired by block where the machine drifted.

An interleaved comparison runs A B B A, A B B A, …: block k holds runs 2k and 2k + 1 of each
side. A machine whose speed changes between blocks (a neighbour's load, heat) moves all four
runs of a block together. The unpaired test (flowrate.results.verdict: Welch over the runs) counts
that drift as noise; a paired test over the blocks' log ratios d_k = mean log B_k − mean log A_k
cancels it (and, by the A B B A order, a linear drift inside a block too), at the price of fewer
degrees of freedom: K − 1 for K blocks against about 4K − 2.

Which to use is read from the runs, from two mean squares of their log values that the paired
test itself does not use: the blocks' MS_block (K − 1 degrees of freedom: how far the blocks'
means spread) and the pure error MS_pe (2K: how far each side's two runs in one block differ).
Their variance components are σ_w² = MS_pe (the noise from run to run) and
σ_drift² = (MS_block − MS_pe) / 4, so F = MS_block / MS_pe estimates 1 + 4 σ_drift² / σ_w². The
paired test's squared standard error is σ_w² / K, the unpaired one's (σ_w² + σ_drift²) / K: pairing
never widens the standard error, but it costs degrees of freedom (K − 1 against about 4K − 2), so
its t quantile is larger. The blocks are paired where the paired interval is expected to be the
narrower one, F > pairing_threshold(K, alpha) = 4 (t(K − 1) / t(4K − 2))² − 3 (quantiles at
1 − alpha/2), with MIN_PAIRED_BLOCKS blocks or more: about 11.9 at 3 blocks, 2.4 at 8 and 1.6 at
15 (alpha 0.05). Where a machine's speed carries over from one process to the next, a fixed
threshold of 5 left many comparisons unpaired at about twice the paired standard error
(benchmarks/RESULTS.md: process_drift).

The paired test's spread, sd(d), comes from the block × side interaction, a third part of the
runs' variation: with normal noise it is independent of both mean squares, so choosing the paired
test from them does not bias it. (Choosing from the residual of an additive fit instead, which
holds that interaction, picks the paired test exactly when sd(d) happened to come out small: its
error rate among the paired comparisons then rises to 6–8% at alpha 5%.) Without drift a large
comparison is paired now and then, and loses only degrees of freedom by it. The simulations in
tests/unit/test_compare_budget_simulation.py pin the error rate at alpha + 1% over every plan
the budget planner can choose, overall and among the comparisons that were paired.

Paired: ratio exp(mean d), standard error sd(d) / √K, t with K − 1 degrees of freedom. Unpaired:
the Welch log-ratio test of flowrate.results.verdict, exactly. The functions work on arrays of
comparisons at once (the last axis holds one comparison's runs), so the simulation runs this
code itself; block_verdict wraps one comparison as a Verdict.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import stdtrit

from flowrate.results.verdict import (
    MIN_OWN_RUNS,
    LogRatioTest,
    Verdict,
    run_level_verdict,
)

MIN_PAIRED_BLOCKS = 3  # two blocks leave the paired test one degree of freedom
PAIRED, UNPAIRED = "paired", "unpaired"


@dataclass(frozen=True)
class BlockTest(LogRatioTest):
    """Arrays over comparisons: log(B/A), its standard error and degrees of freedom (LogRatioTest),
    whether the blocks were paired, the drift's F (NaN with fewer than two blocks), and the F above
    which they are paired (pairing_threshold; inf with fewer than MIN_PAIRED_BLOCKS)."""

    paired: np.ndarray
    drift_f: np.ndarray
    threshold: float


def pairing_threshold(blocks: int, alpha: float) -> float:
    """The drift F above which K = ``blocks`` blocks are paired: where the paired (1 − alpha)
    interval is expected to be narrower than the unpaired one (module docstring); inf with fewer
    than MIN_PAIRED_BLOCKS."""
    if blocks < MIN_PAIRED_BLOCKS:
        return math.inf
    ratio = float(stdtrit(blocks - 1, 1 - alpha / 2) / stdtrit(4 * blocks - 2, 1 - alpha / 2))
    return 4 * ratio * ratio - 3


def block_test(a: np.ndarray, b: np.ndarray, alpha: float) -> BlockTest:
    """The test for runs in A B B A blocks: ``a`` and ``b`` (…, 2K) hold each side's per-run
    values in run order, positive, K ≥ 1 (module docstring); ``alpha``: the level of the interval
    whose width decides whether to pair."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.shape[-1] < 2 or a.shape[-1] % 2:
        raise ValueError(
            f"each side needs the same even number of runs (whole blocks), got {a.shape} and {b.shape}"
        )
    n = a.shape[-1]
    blocks = n // 2
    # unpaired: Welch over the runs' values (flowrate.results.verdict._own), on every comparison
    ma, mb = a.mean(-1), b.mean(-1)
    qa = a.var(-1, ddof=1) / (n * ma * ma)
    qb = b.var(-1, ddof=1) / (n * mb * mb)
    se2 = qa + qb
    denominator = (qa * qa + qb * qb) / (n - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        welch_df = np.where(denominator > 0, se2 * se2 / denominator, np.inf)
    unpaired = (np.log(mb / ma), np.sqrt(se2), welch_df)
    shape = a.shape[:-1]
    if blocks < 2:
        nan = np.full(shape, np.nan)
        return BlockTest(*unpaired, paired=np.zeros(shape, dtype=bool), drift_f=nan, threshold=math.inf)
    la = np.log(a).reshape(*shape, blocks, 2)
    lb = np.log(b).reshape(*shape, blocks, 2)
    block_mean = (la.sum(-1) + lb.sum(-1)) / 4  # (…, K)
    grand = block_mean.mean(-1)
    ms_block = 4 * ((block_mean - grand[..., None]) ** 2).sum(-1) / (blocks - 1)
    # each side's two runs in a block: half their squared difference, summed, over 2K
    ms_pe = (np.diff(la, axis=-1) ** 2 + np.diff(lb, axis=-1) ** 2).sum((-1, -2)) / (4 * blocks)
    with np.errstate(divide="ignore", invalid="ignore"):
        drift_f = np.where(ms_pe > 0, ms_block / ms_pe, np.where(ms_block > 0, np.inf, 0.0))
    d = lb.mean(-1) - la.mean(-1)  # (…, K): each block's log ratio, of geometric means
    paired_se = d.std(-1, ddof=1) / math.sqrt(blocks)
    threshold = pairing_threshold(blocks, alpha)
    paired = drift_f > threshold
    return BlockTest(
        log_ratio=np.where(paired, d.mean(-1), unpaired[0]),
        se=np.where(paired, paired_se, unpaired[1]),
        df=np.where(paired, float(blocks - 1), unpaired[2]),
        paired=paired,
        drift_f=drift_f,
        threshold=threshold,
    )


def block_verdict(
    a: Sequence[float],
    b: Sequence[float],
    *,
    alpha: float,
    min_effect: float,
    history_cv: float | None = None,
    history_runs: int = 0,
) -> Verdict:
    """B against A over one comparison's runs in A B B A blocks (each side in run order). The
    method says which test was used and why; where the sides are not whole blocks, the unpaired
    verdict of flowrate.results.verdict. ``history_cv`` (from ``history_runs`` runs): a between-run
    CV known apart from these runs, which stands in for their spread when a side has fewer than
    MIN_OWN_RUNS (never below it: flowrate.results.verdict), and is otherwise not used."""
    few = min(len(a), len(b)) < MIN_OWN_RUNS
    cv, runs = (history_cv, history_runs) if few else (None, 0)
    if len(a) != len(b) or len(a) < 2 or len(a) % 2:
        return run_level_verdict(a, b, alpha=alpha, min_effect=min_effect, history_cv=cv, history_runs=runs)
    if any(not math.isfinite(v) or v <= 0 for v in (*a, *b)):
        raise ValueError("per-run values must be finite and positive")
    test = block_test(np.array([a]), np.array([b]), alpha)
    blocks = len(a) // 2
    paired = bool(test.paired[0])
    drift = float(test.drift_f[0])
    if not paired:
        verdict = run_level_verdict(
            a, b, alpha=alpha, min_effect=min_effect, history_cv=cv, history_runs=runs
        )
        why = (
            f"unpaired: block drift F {drift:.2f} ≤ {test.threshold:.2f}"
            if blocks >= MIN_PAIRED_BLOCKS
            else f"unpaired: {blocks} block{'s' if blocks != 1 else ''}, pairing needs {MIN_PAIRED_BLOCKS}"
        )
        return replace(
            verdict,
            method=f"{verdict.method}; {why}",
            evidence=f"{verdict.evidence}, {blocks} A B B A blocks ({why})",
        )
    method = (
        f"paired t-test of the blocks' log ratios ({blocks} A B B A blocks, {blocks - 1} degrees of "
        f"freedom; one value per process); paired: block drift F {drift:.2f} > {test.threshold:.2f}"
    )
    block_cv = float(test.se[0]) * math.sqrt(blocks)
    evidence = (
        f"{len(a)} runs a side in {blocks} A B B A blocks, block-ratio CV {block_cv:.1%} "
        "(paired: the machine drifted between blocks)"
    )
    return test.verdict(alpha, min_effect, method, evidence, len(a))
