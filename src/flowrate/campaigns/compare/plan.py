"""How to spend a time budget on a comparison: how many processes a side, how long each measures.

A comparison's unit is the process (flowrate.results.verdict): each run gives one value, and the
interval of B/A narrows as the square root of the processes a side. A process costs its start-up
(fork, model build, preheat, recording) plus the seconds it measures, so a budget buys many short
processes or few long ones. The per-process value's relative variance at ``s`` measured seconds is

    cv²(s) = σ_o² + MEDIAN_EFFICIENCY · σ_w² · interval / s

with σ_o the process's own offset (what a longer run cannot average away), σ_w the CV of one
sample interval and ``interval`` its length, INTERVAL_S or one step where a step is longer (a
value is the median of s / interval intervals;
the median of normal values has π/2 the variance of their mean). A between-run CV measured at
``at_seconds`` a process gives the offset: σ_o² = between² − MEDIAN_EFFICIENCY · σ_w² · interval
/ at_seconds, with the sampling term capped at between² (intervals that agree more than
independent ones would: the measured spread is what counts). Where ``at_seconds`` is unknown,
σ_o² = between²: an overstatement, so a plan leans towards longer processes, never towards a
narrower interval than it gets.

With n processes a side, in A B B A blocks of four, the half-width of the (1 − alpha) interval of
log(B/A) is t(1 − alpha/2, 2n − 2) · cv(s) · √(2/n), and n = ⌊budget / (2 (start-up + s))⌋ rounded
down to whole blocks (an even n). plan() tries each length of SECONDS and keeps the narrowest; two
processes a side (one block) is the least a plan runs.

Where the store's earlier comparisons ran in blocks, their pure error (``block_cv``: how far a
side's two runs in one block differ, flowrate.results.noise.block_cv) says how much of cv(s) is
left once the machine's drift between blocks is cancelled: a share q = min(1, block_cv² / cv²).
The verdict pairs the blocks where the drift F exceeds flowrate.results.blocks.pairing_threshold;
a plan expects F = 1 + 4 (1 − q) / q, and where that is above the threshold for its n / 2 blocks it
expects the paired interval, t(1 − alpha/2, n/2 − 1) · √q · cv(s) · √(2/n), instead.

Where the sides take turns (flowrate.campaigns.process.turns: process i of each side runs at the
same time as the other's, interval by interval), the verdict is the paired t-test over the pairs,
t(1 − alpha/2, n − 1) · σ_d / √n, with σ_d the CV of one pair's ratio. Taking turns cancels the
drift between processes that blocks cancel, and more (the drift within a block too), so σ_d is at
most √2 · √q · cv(s) (q from ``block_cv`` where the store knows it, else 1): a plan expects that
bound, never a narrower interval than the pairs give. The first block's pairs (Earlier: k pairs,
measured at s_e a process before the plan) are compared with the plan's n (the verdict weighs
every pair alike): over all m = n + k pairs the mean log ratio's variance is
(n · σ_d(s)² + k · σ_d(s_e)²) / m², at m − 1 degrees of freedom.

The interval narrows only as fast as the processes a side grow, so a budget may be too short for
the width a user asks for (--until-ci, or --fail-if-slower: the gate sees a slowdown only where it
is larger than the interval's half-width). budget_for() finds the least budget whose plan is that
narrow, so that a plan can say what the width it wanted would cost.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from scipy.special import stdtrit

from flowrate.results.blocks import pairing_threshold
from flowrate.units import duration

MIN_PROCESSES = 2  # a side: one A B B A block
MIN_SECONDS = 0.5  # measured per process, at least: a few sample intervals
SECONDS = (0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0, 30.0, 60.0)  # the lengths a plan tries
INTERVAL_S = 0.2  # a sample interval's length, as `flowrate run` aims for by default
MEDIAN_EFFICIENCY = math.pi / 2  # variance of a median of normal values over that of their mean
MOST_S = 24 * 3600.0  # budget_for looks no further than this


class BudgetTooSmall(ValueError):
    """The budget cannot pay for two processes a side; ``minimum_s`` would."""

    def __init__(self, budget_s: float, minimum_s: float) -> None:
        self.budget_s = budget_s
        self.minimum_s = minimum_s
        super().__init__(f"{budget_s:g} s is too short for two processes a side: at least {minimum_s:.0f} s")


@dataclass(frozen=True)
class Noise:
    """What a plan is made from: the noise of this configuration on this machine and its cost.

    ``between_cv``: the CV of one process's value, measured at ``at_seconds`` a process (None:
    unknown); ``within_cv``: the CV of one sample interval; ``startup_s``: a process's seconds
    beyond those it measures; ``source``: where the figures come from ("the store's 40 earlier
    runs", "a first block of 4 processes"); ``block_cv``: the CV between a side's two runs in one
    block of earlier comparisons (None: unknown), at the same length as ``between_cv``.
    """

    between_cv: float
    within_cv: float
    startup_s: float
    source: str
    at_seconds: float | None = None
    interval_s: float = INTERVAL_S  # a sample interval's length: INTERVAL_S, or one step if longer
    block_cv: float | None = None

    def __post_init__(self) -> None:
        for name in ("between_cv", "within_cv", "startup_s", "block_cv"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be finite and ≥ 0, got {value}")

    @property
    def paired_share(self) -> float | None:
        """q: the share of a process's variance left within a block (module docstring); None
        where the blocks' CV is unknown."""
        if self.block_cv is None:
            return None
        if self.between_cv == 0:
            return 1.0
        return min(1.0, (self.block_cv / self.between_cv) ** 2)

    def process_cv(self, seconds: float) -> float:
        """The CV of one process's value when it measures ``seconds`` (module docstring)."""
        interval_s = self.interval_s
        sampling = MEDIAN_EFFICIENCY * self.within_cv**2 * interval_s  # × 1/s: the sampling variance
        offset2 = self.between_cv**2
        if self.at_seconds is not None:
            at = max(self.at_seconds, interval_s)
            sampling = min(sampling, offset2 * at)  # never more than the between-run CV it is part of
            offset2 -= sampling / at
        return math.sqrt(offset2 + sampling / max(seconds, interval_s))


@dataclass(frozen=True)
class Earlier:
    """Pairs that took turns before a plan and are compared with its own: how many, and the
    seconds each of their processes measured (module docstring). The default: none."""

    pairs: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class Plan:
    """Processes a side, and the seconds each measures, for a budget; and why."""

    processes: int  # a side, in A B B A blocks (even)
    seconds: float  # each process measures this long (`flowrate run --duration`)
    budget_s: float
    noise: Noise
    half_width: float  # the expected half-width of the interval of B/A, relative (0.01: ±1%)
    preheat_steps: int | None = None  # each process's warm-up steps; None: the side's own
    wanted: float | None = None  # the half-width asked for, where the plan's is wider
    wanted_budget_s: float | None = None  # the whole budget that would buy it; None: more than MOST_S
    paired: bool = False  # whether half_width is the paired interval's (module docstring)
    turns: bool = False  # whether the sides take turns, in pairs (module docstring)
    earlier: Earlier = Earlier()  # pairs measured before the plan and compared with its own (turns)

    @property
    def process_s(self) -> float:
        """The expected wall time of one process."""
        return self.noise.startup_s + self.seconds

    @property
    def reason(self) -> str:
        steps = self.preheat_steps
        preheat = "" if steps is None else f", {steps} warm-up step{'s' if steps != 1 else ''}"
        bound = "at most " if self.turns else ""
        reason = (
            f"{self.processes} processes of {self.seconds:g} s a side{preheat}: between-run CV "
            f"{self.noise.between_cv:.1%}, within-run CV {self.noise.within_cv:.1%}, start-up "
            f"{self.noise.startup_s:.1f} s ({self.noise.source}); expected interval "
            f"{bound}±{self.half_width:.1%}"
        )
        if self.turns:
            reason += ", in pairs of processes that take turns"
            if self.earlier.pairs:
                reason += f" (the first block's {self.earlier.pairs} pairs counted)"
        elif self.paired and self.noise.block_cv is not None:
            reason += f", paired by block (CV within a block {self.noise.block_cv:.1%})"
        if self.wanted is None:
            return reason
        cost = (
            f"more than {duration(MOST_S)}"
            if self.wanted_budget_s is None
            else f"about {duration(math.ceil(self.wanted_budget_s))}"
        )
        return f"{reason}, wider than the ±{self.wanted:.1%} asked for: that would take a budget of {cost}"

    def wanting(self, half_width: float | None, spent_s: float, alpha: float) -> Plan:
        """The plan, saying what a budget of ``half_width`` would take where its own interval is
        wider (``spent_s``: of the budget, spent before the plan and kept after it)."""
        if half_width is None or self.half_width <= half_width:
            return self
        more = budget_for(self.noise, half_width, alpha, self.turns, self.earlier)
        return dataclasses.replace(
            self, wanted=half_width, wanted_budget_s=None if more is None else spent_s + more
        )


def minimum_budget(startup_s: float) -> float:
    """The least budget that buys two processes a side of MIN_SECONDS each."""
    return 2 * MIN_PROCESSES * (startup_s + MIN_SECONDS)


def processes_within(budget_s: float, process_s: float) -> int:
    """Processes a side that ``budget_s`` pays for at ``process_s`` each, in whole blocks."""
    return 2 * math.floor(budget_s / (4 * process_s)) if process_s > 0 else 0


def expects_pairing(noise: Noise, processes: int, alpha: float) -> bool:
    """Whether the verdict is expected to pair ``processes`` a side by block (module docstring)."""
    share = noise.paired_share
    if share is None or share >= 1:
        return False
    drift_f = math.inf if share == 0 else 1 + 4 * (1 - share) / share
    return drift_f > pairing_threshold(processes // 2, alpha)


def expected_half_width(
    noise: Noise,
    processes: int,
    seconds: float,
    alpha: float,
    turns: bool = False,
    earlier: Earlier = Earlier(),
) -> float:
    """The expected relative half-width of the (1 − alpha) interval of B/A (module docstring);
    with ``turns``, its bound for pairs that take turns, the ``earlier`` pairs among them."""
    cv = noise.process_cv(seconds)
    if turns:
        share = 1.0 if noise.paired_share is None else noise.paired_share
        pairs = processes + earlier.pairs
        first = earlier.pairs * noise.process_cv(earlier.seconds) ** 2 if earlier.pairs else 0.0
        squares = processes * cv**2 + first
        t = float(stdtrit(pairs - 1, 1 - alpha / 2))
        return math.expm1(t * math.sqrt(share * 2 * squares) / pairs)
    if expects_pairing(noise, processes, alpha):
        t = float(stdtrit(processes // 2 - 1, 1 - alpha / 2))
        return math.expm1(t * math.sqrt(noise.paired_share or 0.0) * cv * math.sqrt(2 / processes))
    t = float(stdtrit(2 * processes - 2, 1 - alpha / 2))
    return math.expm1(t * cv * math.sqrt(2 / processes))


def plan(
    budget_s: float, noise: Noise, alpha: float, turns: bool = False, earlier: Earlier = Earlier()
) -> Plan:
    """The narrowest interval ``budget_s`` buys (module docstring; ``turns``: for sides that take
    turns, with the ``earlier`` pairs measured before it and compared with its own);
    BudgetTooSmall when it cannot pay for two processes a side. Ties go to the shorter length
    (more processes)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie between 0 and 1, got {alpha}")
    best: Plan | None = None
    for seconds in SECONDS:
        processes = processes_within(budget_s, noise.startup_s + seconds)
        if processes < MIN_PROCESSES:
            continue
        width = expected_half_width(noise, processes, seconds, alpha, turns, earlier)
        if best is None or width < best.half_width:
            paired = turns or expects_pairing(noise, processes, alpha)
            best = Plan(processes, seconds, budget_s, noise, width, paired=paired, turns=turns)
            if turns:
                best = dataclasses.replace(best, earlier=earlier)
    if best is None:
        raise BudgetTooSmall(budget_s, minimum_budget(noise.startup_s))
    return best


def budget_for(
    noise: Noise,
    half_width: float,
    alpha: float,
    turns: bool = False,
    earlier: Earlier = Earlier(),
) -> float | None:
    """The least budget (to the second) whose plan's expected half-width is at most
    ``half_width`` (``earlier`` pairs counted as plan() counts them); None where even MOST_S is
    too short. A plan's width never grows with its budget (each length buys at least as many
    processes), so the least budget is found by bisection."""
    if not half_width > 0:
        raise ValueError(f"half_width must be > 0, got {half_width}")

    def narrow(budget_s: float) -> bool:
        try:
            return plan(budget_s, noise, alpha, turns, earlier).half_width <= half_width
        except BudgetTooSmall:
            return False

    if not narrow(MOST_S):
        return None
    low, high = 0.0, MOST_S  # narrow(low) is False, narrow(high) True
    while high - low > 1.0:
        middle = (low + high) / 2
        low, high = (low, middle) if narrow(middle) else (middle, high)
    return high
