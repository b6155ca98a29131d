"""Two things (or more) measured side by side, as `flowrate compare` measures two configurations.

``side_by_side(run_a, run_b, runs)`` calls the two alternately in flowrate's ABBA order (the
order of flowrate.campaigns.compare.interleave.abba_order: A B B A A B …, so a drift in the
machine falls on both alike), ``runs`` times each, and returns each side's values with B / A and
its confidence interval as `flowrate compare` gets them from runs in A B B A blocks
(flowrate.results.blocks): over the whole blocks (two rounds each; an odd last round is left out
of the test), paired by block where the machine drifted between blocks more than the noise within
them, else the ratio of the means with Welch's interval. Under two whole blocks: the ratio of the
means with its interval from the runs' own spread (flowrate.results.verdict.ratio_ci). A
benchmark script that compares its way of doing something with another's calls this instead of
a loop of its own.

``in_rounds(sides, runs)`` is the same order for any number of sides and any value a call
returns (a rate with its peak memory, a start-up and a wall time): round after round, the order
turned round each time (A B C, C B A, A B C …; with two sides, ABBA). ``warmup`` rounds run first,
in the same order, and are not kept. ``in_rounds_async`` does the same with coroutines.
``SideBySide(a, b)`` then compares any one value of two sides.
"""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from flowrate.results.blocks import BlockTest, block_test
from flowrate.results.verdict import ratio_ci

T = TypeVar("T")
LEVEL = 0.95  # of the interval, unless a script asks for another
MIN_BLOCKS = 2  # whole A B B A blocks the block test needs


@dataclass(frozen=True)
class SideBySide:
    """Each side's values in the order they ran, and B / A with its interval."""

    a: tuple[float, ...]
    b: tuple[float, ...]
    level: float = LEVEL  # of the interval

    def _blocks(self) -> BlockTest | None:
        """flowrate's test over the whole A B B A blocks, where there are two or more."""
        whole = 2 * (min(len(self.a), len(self.b)) // 2)
        if whole < 2 * MIN_BLOCKS or min(*self.a, *self.b) <= 0:
            return None
        return block_test(np.array([self.a[:whole]]), np.array([self.b[:whole]]), 1 - self.level)

    @property
    def paired(self) -> bool:
        """Whether the blocks were paired (the machine drifted between them)."""
        test = self._blocks()
        return bool(test is not None and test.paired[0])

    @property
    def ratio(self) -> float:
        """B / A: over whole blocks as the block test has it (module docstring), else
        mean(B) / mean(A)."""
        test = self._blocks()
        if test is not None:
            return float(np.exp(test.log_ratio[0]))
        return statistics.mean(self.b) / statistics.mean(self.a)

    @property
    def interval(self) -> tuple[float, float] | None:
        """The ``level`` interval of the ratio; None with fewer than 2 runs a side."""
        test = self._blocks()
        if test is not None:
            low, high = test.interval(1 - self.level)
            return float(low[0]), float(high[0])
        if min(len(self.a), len(self.b)) < 2:
            return None
        return ratio_ci(self.a, self.b, level=self.level)

    def describe(self) -> str:
        """ "B/A 0.995 [0.981, 1.010] (95%, 8 runs a side, paired by block)"."""
        found = self.interval
        shown = f" [{found[0]:.3f}, {found[1]:.3f}] ({self.level:.0%}" if found else " (no interval"
        runs = len(self.a)
        how = ", paired by block" if self.paired else ""
        return f"B/A {self.ratio:.3f}{shown}, {runs} run{'s' if runs != 1 else ''} a side{how})"


def order(names: Sequence[str], runs: int, warmup: int = 0) -> list[tuple[str, bool]]:
    """Which side runs next and whether its value is kept: ``warmup + runs`` rounds, one call a
    side a round, the order turned round each round (with two sides: A B B A A B …), the first
    ``warmup`` rounds not kept."""
    if runs < 1 or warmup < 0:
        raise ValueError(f"runs must be 1 or more and warmup 0 or more, got {runs} and {warmup}")
    return [
        (name, round_ >= warmup)
        for round_ in range(warmup + runs)
        for name in (names if round_ % 2 == 0 else list(reversed(names)))
    ]


def in_rounds(
    sides: Mapping[str, Callable[[], T]], runs: int, *, warmup: int = 0
) -> dict[str, tuple[T, ...]]:
    """Each side called ``runs`` times in ``order`` (after ``warmup`` rounds not kept): what each
    call returned, by side, in the order they ran."""
    kept: dict[str, list[T]] = {name: [] for name in sides}
    for name, keep in order(list(sides), runs, warmup):
        value = sides[name]()
        if keep:
            kept[name].append(value)
    return {name: tuple(values) for name, values in kept.items()}


async def in_rounds_async(
    sides: Mapping[str, Callable[[], Awaitable[T]]], runs: int, *, warmup: int = 0
) -> dict[str, tuple[T, ...]]:
    """``in_rounds`` for sides that are coroutines (requests on one event loop), awaited one at a
    time."""
    kept: dict[str, list[T]] = {name: [] for name in sides}
    for name, keep in order(list(sides), runs, warmup):
        value = await sides[name]()
        if keep:
            kept[name].append(value)
    return {name: tuple(values) for name, values in kept.items()}


def side_by_side(
    run_a: Callable[[], float],
    run_b: Callable[[], float],
    runs: int,
    level: float = LEVEL,
    *,
    warmup: int = 0,
) -> SideBySide:
    """Run A and B ``runs`` times each, alternately in ABBA order (after ``warmup`` rounds not
    kept); each call returns one value (samples/s, seconds: whatever the two are compared on)."""
    done = in_rounds({"A": run_a, "B": run_b}, runs, warmup=warmup)
    return SideBySide(done["A"], done["B"], level)
