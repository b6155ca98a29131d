"""Two configurations run alternately in fresh processes until a verdict can be given.

Order: A B B A A B B A … (ABBA): a drift in the machine (clocks, heat, a neighbour's load)
falls on both sides alike instead of on whichever side ran last, and a linear drift cancels
over each block of four. Each run is a fresh process (flowrate.campaigns.process.child says why), so the
runs are independent draws of each side's per-process value, the unit the verdict rests on
(flowrate.results.verdict).

Stopping. With a fixed count, N runs a side. With ``until_ci``, pairs are added until the
confidence interval of the ratio B/A is narrower than ± that fraction, with at least
MIN_RUNS a side and at most ``max_runs``: a fixed-width confidence-interval rule (Chow and
Robbins, 1965). The rule looks at the interval's width, not at its place, but it stops more
readily when the runs happen to agree, which is when their spread understates the noise; tested
at the nominal alpha, an A/A comparison is called different up to 7% of the time instead of 5%
(worst where the target width is near the per-run spread). So a sequential verdict is tested,
and its interval drawn, at alpha × SEQUENTIAL_ALPHA_SHARE (a half). Simulated with normal
per-run values over target widths from half to twice the spread, maxima of 6 to 40 runs a side
and alpha 0.01 to 0.2, the false-positive rate stayed under alpha (at alpha 0.05: 3.9% at
worst); tests/unit/test_interleave.py checks it at the worst setting, 2,000 A/A comparisons
from a two-level model (run offsets, autocorrelated intervals), and that without the halving
the same rule exceeds alpha + 1%.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from flowrate.results.verdict import ratio_ci

A, B = "A", "B"
MIN_RUNS = 3  # a side, for a sequential comparison: two runs say little about the spread
SEQUENTIAL_ALPHA_SHARE = 0.5
FIXED, NARROW, AT_MAX, INTERRUPTED = "fixed count", "interval narrow enough", "maximum reached", "interrupted"


def abba_order(count: int) -> list[str]:
    """The sides of the first ``count`` runs: A B, B A, A B, … pair after pair."""
    return [(A, B)[(index // 2 + index) % 2] for index in range(count)]


@dataclass(frozen=True)
class StoppingRule:
    """When an interleaved comparison has enough runs.

    ``runs``: runs a side (with ``until_ci``: the least); ``until_ci``: the target half-width
    of the ratio's interval as a fraction of the ratio (0.01 is ±1%); ``max_runs``: the most a
    side with ``until_ci``; ``alpha``: the significance level the user asked for.
    """

    runs: int
    alpha: float
    until_ci: float | None = None
    max_runs: int | None = None

    def __post_init__(self) -> None:
        if self.runs < 1:
            raise ValueError(f"runs must be 1 or more, got {self.runs}")
        if self.until_ci is not None:
            if not (math.isfinite(self.until_ci) and self.until_ci > 0):
                raise ValueError(f"until_ci must be a positive fraction, got {self.until_ci}")
            if self.max_runs is None or self.max_runs < max(self.runs, MIN_RUNS):
                raise ValueError(f"max_runs must be at least {max(self.runs, MIN_RUNS)}, got {self.max_runs}")

    @property
    def sequential(self) -> bool:
        return self.until_ci is not None

    @property
    def least(self) -> int:
        """The runs a side before the rule may stop."""
        return max(self.runs, MIN_RUNS) if self.sequential else self.runs

    @property
    def verdict_alpha(self) -> float:
        """The level the verdict is tested at: alpha, shared down when the stopping is sequential."""
        return self.alpha * SEQUENTIAL_ALPHA_SHARE if self.sequential else self.alpha

    @property
    def method(self) -> str:
        """The rule in words, for the output."""
        if not self.sequential:
            return f"fixed count: {self.runs} run{'s' if self.runs != 1 else ''} a side, interleaved A B B A"
        assert self.until_ci is not None
        return (
            f"fixed-width interval rule (Chow–Robbins): pairs until the {1 - self.verdict_alpha:.1%} "
            f"interval of B/A is within ±{self.until_ci:.2%}, {self.least} to {self.max_runs} runs a "
            f"side; tested at alpha {self.verdict_alpha:g} (half of {self.alpha:g}) so that stopping "
            "early keeps the false-positive rate at alpha"
        )

    def stop(self, a: list[float], b: list[float]) -> str | None:
        """Why to stop after these per-run values (one pair more each time), or None to go on."""
        n = min(len(a), len(b))
        if n < self.least:
            return None
        if not self.sequential:
            return FIXED
        assert self.until_ci is not None and self.max_runs is not None
        low, high = ratio_ci(a, b, level=1 - self.verdict_alpha)
        ratio = (sum(b) / len(b)) / (sum(a) / len(a))
        if (high - low) / (2 * ratio) <= self.until_ci:
            return NARROW
        return AT_MAX if n >= self.max_runs else None


@dataclass
class Interleaved:
    """The per-run values of each side so far and why the runs stopped."""

    values: dict[str, list[float]] = field(default_factory=lambda: {A: [], B: []})
    stopped: str | None = None  # one of FIXED, NARROW, AT_MAX, INTERRUPTED


def interleave(rule: StoppingRule, run_one: Callable[[str], float]) -> Interleaved:
    """Run the sides alternately (abba_order) until ``rule`` stops, checking after each pair.

    ``run_one(side)`` runs one side once and returns its per-run value. An interrupt (Ctrl-C)
    ends the comparison with what was measured so far, marked INTERRUPTED; any other exception
    goes up to the caller (each run is recorded by ``run_one`` as it ends, so none is lost).
    """
    done = Interleaved()
    index = 0
    try:
        while done.stopped is None:
            for side in abba_order(index + 2)[index:]:
                done.values[side].append(run_one(side))
            index += 2
            done.stopped = rule.stop(done.values[A], done.values[B])
    except KeyboardInterrupt:
        done.stopped = INTERRUPTED
    return done
