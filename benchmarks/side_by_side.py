"""Two things measured side by side, as `flowrate compare` measures two configurations.

``side_by_side(run_a, run_b, runs)`` calls the two alternately in flowrate's ABBA order
(flowrate.campaigns.compare.interleave: A B B A A B …, so a drift in the machine falls on both
alike), ``runs`` times each, and returns each side's values with the ratio mean(B) / mean(A) and
its confidence interval from the runs' own spread (flowrate.results.verdict.ratio_ci). A benchmark
script that compares its way of doing something with another's calls this instead of a loop of
its own.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from flowrate.campaigns.compare.interleave import FIXED, A, B, StoppingRule, interleave
from flowrate.results.verdict import ratio_ci


@dataclass(frozen=True)
class SideBySide:
    """Each side's values in the order they ran, and B / A with its interval."""

    a: tuple[float, ...]
    b: tuple[float, ...]
    level: float  # of the interval

    @property
    def ratio(self) -> float:
        """mean(B) / mean(A)."""
        return statistics.mean(self.b) / statistics.mean(self.a)

    @property
    def interval(self) -> tuple[float, float] | None:
        """The ``level`` interval of the ratio; None with fewer than 2 runs a side."""
        if min(len(self.a), len(self.b)) < 2:
            return None
        return ratio_ci(self.a, self.b, level=self.level)

    def describe(self) -> str:
        """ "B/A 0.995 [0.981, 1.010] (95%, 7 runs a side)"."""
        found = self.interval
        shown = f" [{found[0]:.3f}, {found[1]:.3f}] ({self.level:.0%}" if found else " (no interval"
        runs = len(self.a)
        return f"B/A {self.ratio:.3f}{shown}, {runs} run{'s' if runs != 1 else ''} a side)"


def side_by_side(
    run_a: Callable[[], float], run_b: Callable[[], float], runs: int, level: float = 0.95
) -> SideBySide:
    """Run A and B ``runs`` times each, alternately in ABBA order; each call returns one value
    (samples/s, seconds: whatever the two are compared on)."""
    rule = StoppingRule(runs=runs, alpha=1 - level)
    done = interleave(rule, lambda side: (run_a if side == A else run_b)())
    if done.stopped != FIXED:
        raise KeyboardInterrupt  # interleave keeps what an interrupt left; a benchmark stops
    return SideBySide(tuple(done.values[A]), tuple(done.values[B]), level)
