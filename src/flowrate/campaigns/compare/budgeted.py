"""A comparison within a time budget: a first block measures, a plan spends the rest.

The budget bounds the whole comparison's wall-clock time, counted from ``started``:

1. A first A B B A block of short processes (PILOT_SECONDS each, less for a small budget) measures
   a process's start-up on this machine (its wall time less the seconds it was asked to measure;
   the median of the four, as the first may start the fork server) and how steady its intervals
   are, and
   names the configuration whose history the store may hold. Its runs are recorded (tagged
   …:pilot) but, one at a time, not compared: they measured for a different length than the rest
   (in turns they are: below). A slow step
   warms up in fewer steps than `flowrate run`'s five: where the first process's steps took longer
   than PREHEAT_S / 5, every later process (the first block's other three included) warms up for
   PREHEAT_S of steps, and at least MIN_PREHEAT_STEPS (the first step allocates the optimizer's
   state and the allocator's blocks). A run on synthetic data counts its executed FLOPs over one
   real step before its warm-up (flowrate.harness.run): that step warms up as any other, so it is
   one of them, and the run is asked for one fewer.
2. The noise is the store's between-run CV of the configuration where it knows one
   (``history_of``), else the first block's own. flowrate.campaigns.compare.plan chooses the
   processes a side and their length for what is left of the budget; the start-up it counts is
   that of a process with the shorter warm-up.
3. Blocks of four run at that length while the next would end within the budget less FINISH_S
   (kept for the verdict, the record and the output; its length
   judged by the slowest process so far, the first block's included but for its first process,
   which may have started the fork server), or, with ``until_ci``, until the interval of B/A is
   that narrow (flowrate.results.blocks, at the verdict's level). When not even one block fits
   (start-up varied more than its median said), the budget is too small: BudgetTooSmall.

Where the sides can take turns (``run_pair``: flowrate.campaigns.process.turns), every block, the
first included, is two pairs, A with B and then B with A (who takes the first turn alternates),
each pair two processes at once; a pair's wall time counts half to each of its processes, so a
block costs what four processes one after another would. The verdict then pairs run i of A with
run i of B (flowrate.results.turns), and the plan expects that (flowrate.campaigns.compare.plan).
Three things change with it:

- The warm-up. At every hand-over the two processes of a pair are at the same point of their
  lives (interval i of one follows interval i of the other), so a transient common to both, the
  allocator and caches settling, cancels in the pair's ratio. The warm-up need only take the
  first step's one-time costs (the optimizer's state, first calls) out of the timed window:
  TURNS_PREHEAT_S of steps and at least TURNS_MIN_PREHEAT_STEPS, the counted step included; the
  first pair, before a step has been timed, warms up for TURNS_MIN_PREHEAT_STEPS after its counted
  step (a slow step's five would take most of a small budget).
- The first block is compared. Each pair is compared within itself, so that the first block's
  two pairs measured another length than the plan's changes how much they weigh in the verdict,
  not what they measure; their values go into the verdict with the planned pairs' (and the runs
  are tagged with their side as well as …:pilot), and the plan counts them in the interval it
  expects.
- The end. Where a block no longer fits but one pair does, that pair runs alone, instead of
  leaving up to a block's time of the budget unused. Which side takes its first turn is a coin's
  toss (``first_mover``): the blocks before it give each side the first turn equally often, and
  a lone pair that always gave it to A would carry whatever holding the first turn does to a
  ratio into every verdict in the same direction.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from flowrate.campaigns.compare.interleave import INTERRUPTED, NARROW, A, B, abba_order
from flowrate.campaigns.compare.plan import (
    INTERVAL_S,
    MIN_SECONDS,
    BudgetTooSmall,
    Earlier,
    Noise,
    Plan,
    minimum_budget,
    plan,
)
from flowrate.results.blocks import PAIRED, UNPAIRED, block_test
from flowrate.results.compare import Comparison, History
from flowrate.results.turns import MIN_PAIRS, turns_test

PILOT_SECONDS = 1.0  # measured by each process of the first block, at most
PILOT_SHARE = 0.25  # of the budget, the most the first block is planned to take
ASSUMED_STARTUP_S = 1.0  # a process's start-up before the first block has measured it
FINISH_S = 1.5  # of the budget, kept for comparing, recording and printing after the last block
PREHEAT_S = 1.0  # of steps, the warm-up a planned process needs at least (module docstring)
MIN_PREHEAT_STEPS = 2
TURNS_PREHEAT_S = 0.25  # the same, for processes that take turns (module docstring)
TURNS_MIN_PREHEAT_STEPS = 1
BUDGET_SPENT = "budget spent"
TURNS = "turns"  # the analysis: paired by the pairs that took turns (flowrate.results.turns)
# a block's processes: one at a time in A B B A order, or as two pairs that take turns
ONE_AT_A_TIME = tuple((label,) for label in abba_order(4))
IN_TURNS = ((A, B), (B, A))

# run_pair(first, second, seconds, pilot, preheat): two processes taking turns, ``first``
# holding the first turn, each recorded; their Processes in that order
RunPair = Callable[[str, str, float, bool, "int | None"], "tuple[Process, Process]"]


@dataclass(frozen=True)
class Process:
    """One process as the budget sees it: its value, its wall time, the seconds it measured and
    the seconds it was asked to (its wall time less those is its start-up); the seconds one of its
    timed steps took, its warm-up steps (None where unknown), and whether a counted step ran
    before them."""

    label: str
    value: float
    wall_s: float
    measured_s: float
    within_cv: float | None
    asked_s: float
    step_s: float | None = None
    preheat_steps: int | None = None
    counted: bool = False  # a step counted op by op ran before its warm-up steps

    @property
    def startup_s(self) -> float:
        return max(0.0, self.wall_s - self.asked_s)

    def startup_with(self, preheat: int | None) -> float:
        """Its start-up had it warmed up for ``preheat`` steps (None: its own)."""
        if preheat is None or self.step_s is None or self.preheat_steps is None:
            return self.startup_s
        return max(0.0, self.startup_s - (self.preheat_steps - preheat) * self.step_s)


@dataclass
class Spent:
    """How a budget was spent: the first block, the plan, the compared runs' values and why they
    stopped (BUDGET_SPENT, NARROW or INTERRUPTED)."""

    budget_s: float
    pilot: list[Process] = field(default_factory=list)
    plan: Plan | None = None
    values: dict[str, list[float]] = field(default_factory=lambda: {A: [], B: []})
    stopped: str | None = None
    # the between-run noise the plan used, as a history apart from the compared runs: the store's,
    # or the first block's (2 degrees of freedom)
    history: History | None = None
    elapsed_s: float = 0.0
    lone_pair: bool = False  # the last pair ran without its block's other (module docstring)


def analysis_of(values: dict[str, list[float]], alpha: float, turns: bool = False) -> str:
    """PAIRED or UNPAIRED: the test flowrate.results.blocks chose for these runs' throughput at the
    verdict's ``alpha``; TURNS where the runs were pairs that took turns (and are paired)."""
    a, b = values[A], values[B]
    if turns:
        return TURNS if len(a) == len(b) >= MIN_PAIRS else UNPAIRED
    if len(a) != len(b) or len(a) < 2 or len(a) % 2:
        return UNPAIRED
    return PAIRED if bool(block_test(np.array([a]), np.array([b]), alpha).paired[0]) else UNPAIRED


def budget_report(spent: Spent, comparison: Comparison) -> dict[str, Any]:
    """How the budget was spent, for the JSON: the budget, the first block, the plan, the runs,
    the analysis (paired or not) and the interval of B/A's samples/s at the verdict's level."""
    throughput = comparison.metric("samples_per_sec")
    chosen = spent.plan
    return {
        "budget_s": spent.budget_s,
        "elapsed_s": spent.elapsed_s,
        "stopped": spent.stopped,
        "first_block": {
            "processes": len(spent.pilot),
            "seconds": spent.pilot[0].measured_s if spent.pilot else None,
            "startup_s": chosen.noise.startup_s if chosen else None,
        },
        "plan": None
        if chosen is None
        else {
            "processes_a_side": chosen.processes,
            "seconds": chosen.seconds,
            "preheat_steps": chosen.preheat_steps,
            "expected_half_width": chosen.half_width,
            "expected_paired": chosen.paired,
            "wanted_half_width": chosen.wanted,
            "wanted_budget_s": chosen.wanted_budget_s,
            "reason": chosen.reason,
            "noise": asdict(chosen.noise),
        },
        "lone_pair": spent.lone_pair,
        "runs_a_side": min(len(spent.values[A]), len(spent.values[B])),
        "analysis": analysis_of(spent.values, comparison.alpha, chosen is not None and chosen.turns),
        "interval": None
        if throughput is None
        else {
            "metric": "samples_per_sec",
            "level": 1 - comparison.alpha,
            "ratio": throughput.ratio,
            "low": throughput.ci_low,
            "high": throughput.ci_high,
            "verdict": throughput.verdict,
        },
    }


def minimum_budget_s(startup_s: float = ASSUMED_STARTUP_S) -> float:
    """The least budget that pays for the first block and two processes a side after it."""
    return 2 * minimum_budget(startup_s)


def pilot_seconds(budget_s: float) -> float:
    """What each process of the first block measures: PILOT_SECONDS, less for a small budget."""
    share = budget_s * PILOT_SHARE / 4 - ASSUMED_STARTUP_S
    return min(PILOT_SECONDS, max(MIN_SECONDS, math.floor(share * 10) / 10))


def step_s(pilot: Sequence[Process]) -> float | None:
    """The first block's median seconds a timed step; None where no process knows its own."""
    steps = [p.step_s for p in pilot if p.step_s]
    return statistics.median(steps) if steps else None


def planned_preheat(pilot: Sequence[Process], turns: bool = False) -> int | None:
    """The warm-up steps of the processes after ``pilot`` (module docstring; ``turns``: processes
    that take turns), the counted step aside where every process of ``pilot`` ran one: None where
    the side's own (the most any of them warmed up for) are as few, or the step time or warm-up is
    unknown."""
    step = step_s(pilot)
    own = [p.preheat_steps for p in pilot if p.preheat_steps is not None]
    if step is None or not own:
        return None
    least, seconds = (TURNS_MIN_PREHEAT_STEPS, TURNS_PREHEAT_S) if turns else (MIN_PREHEAT_STEPS, PREHEAT_S)
    fewer = max(least, math.ceil(seconds / step)) - all(p.counted for p in pilot)
    return fewer if fewer < max(own) else None


def noise_from(pilot: Sequence[Process], history: History | None, preheat: int | None = None) -> Noise:
    """The plan's noise: start-up and steadiness from the first block (less the warm-up steps
    ``preheat`` saves), the between-run CV from the store's history where there is one, else from
    the first block's two runs a side."""
    startup = statistics.median(p.startup_with(preheat) for p in pilot)
    cvs = [p.within_cv for p in pilot if p.within_cv is not None]
    within = statistics.fmean(cvs) if cvs else 0.0
    interval = max(INTERVAL_S, step_s(pilot) or 0.0)
    if history is not None:
        return Noise(
            history.cv,
            within,
            startup,
            f"the store's {history.runs} earlier runs",
            interval_s=interval,
            block_cv=history.block_cv,
        )
    squares, df = 0.0, 0
    for label in (A, B):
        values = [p.value for p in pilot if p.label == label]
        mean = statistics.fmean(values)
        squares += sum((v / mean - 1) ** 2 for v in values)
        df += len(values) - 1
    at = statistics.fmean(p.measured_s for p in pilot)
    source = f"a first block of {len(pilot)} processes"
    return Noise(math.sqrt(squares / df), within, startup, source, at, interval)


def narrow_enough(values: dict[str, list[float]], until_ci: float, alpha: float, turns: bool = False) -> bool:
    """Whether the interval of B/A over whole blocks (two or more) is within ±``until_ci``; with
    ``turns``, that over the pairs (flowrate.results.turns)."""
    a, b = values[A], values[B]
    if turns:
        if len(a) != len(b) or len(a) < 2 * MIN_PAIRS:
            return False
        low, high = turns_test(np.array([a]), np.array([b])).interval(alpha)
        return bool((high[0] - low[0]) / (high[0] + low[0]) <= until_ci)
    if len(a) != len(b) or len(a) < 4 or len(a) % 2:
        return False
    low, high = block_test(np.array([a]), np.array([b]), alpha).interval(alpha)
    return bool((high[0] - low[0]) / (high[0] + low[0]) <= until_ci)


def spend(
    budget_s: float,
    *,
    clock: Callable[[], float],
    started: float,
    run_one: Callable[[str, float, bool, int | None], Process],
    history_of: Callable[[], History | None],
    alpha: float,
    until_ci: float | None = None,
    on_plan: Callable[[Plan], None] = lambda chosen: None,
    own_preheat: bool = False,
    wanted: float | None = None,
    run_pair: RunPair | None = None,
    first_mover: Callable[[], int] = lambda: random.randrange(2),
) -> Spent:
    """Spend ``budget_s`` (module docstring). ``run_one(label, seconds, pilot, preheat)`` runs one
    process of a side (with ``preheat`` warm-up steps; None: the side's own), recording it;
    ``history_of()`` (after the first block) is the store's noise for its configuration; ``alpha``
    the verdict's level (the interval the plan and ``until_ci`` judge); ``on_plan`` hears of the
    plan once it is made; ``own_preheat``: a side sets its warm-up, so the plan keeps it;
    ``wanted``: the half-width the user asked for (``until_ci``, or the gate's largest allowed
    slowdown), which a plan with a wider one says the budget of (Plan.wanting); ``run_pair``: the
    sides take turns, every block as two pairs (module docstring), and ``first_mover()`` tosses
    the coin for a lone last pair: 0 gives A the first turn, 1 gives it to B.
    BudgetTooSmall when the first block overruns the budget, or what is left after it cannot pay
    for one block (its ``minimum_s``, from the start-up measured); an
    interrupt (Ctrl-C) ends the runs, marked INTERRUPTED."""
    spent = Spent(budget_s)
    turns = run_pair is not None
    units: tuple[tuple[str, ...], ...] = IN_TURNS if turns else ONE_AT_A_TIME

    def run_unit(unit: tuple[str, ...], seconds: float, pilot: bool, preheat: int | None) -> list[Process]:
        if run_pair is not None:
            return list(run_pair(unit[0], unit[1], seconds, pilot, preheat))
        return [run_one(unit[0], seconds, pilot, preheat)]

    try:
        first = pilot_seconds(budget_s)
        # until the first processes have timed a step: the side's own warm-up, or in turns the least
        preheat = TURNS_MIN_PREHEAT_STEPS if turns and not own_preheat else None
        for unit in units:
            if spent.pilot and clock() - started > budget_s:  # the first block alone overran it
                startup = statistics.median(p.startup_s for p in spent.pilot)
                raise BudgetTooSmall(budget_s, minimum_budget_s(startup))
            spent.pilot.extend(run_unit(unit, first, True, preheat))
            if len(spent.pilot) == len(unit) and not own_preheat:
                preheat = planned_preheat(spent.pilot, turns)
        known = history_of()
        noise = noise_from(spent.pilot, known, preheat)
        spent.history = known or History(noise.between_cv, len(spent.pilot) - 1)
        if turns:  # the first block's pairs are compared too (module docstring)
            for process in spent.pilot:
                spent.values[process.label].append(process.value)
        left = budget_s - FINISH_S - (clock() - started)
        try:
            earlier = Earlier(len(spent.pilot) // 2, first) if turns else Earlier()  # compared (above)
            chosen = plan(left, noise, alpha, turns, earlier)
            chosen = dataclasses.replace(chosen, preheat_steps=preheat)
            spent.plan = chosen.wanting(wanted, budget_s - left, alpha)
        except BudgetTooSmall:
            minimum = clock() - started + minimum_budget(noise.startup_s) + FINISH_S
            raise BudgetTooSmall(budget_s, minimum) from None
        on_plan(spent.plan)
        # the first processes may have started the fork server: they do not say how slow one is
        later = spent.pilot[len(units[0]) :]
        slowest = max(spent.plan.process_s, *(p.startup_with(preheat) + spent.plan.seconds for p in later))
        planned = False
        while spent.stopped is None:
            left = budget_s - FINISH_S - (clock() - started)
            block = units
            if 4 * slowest > left:
                if not planned:  # not one planned block fits
                    raise BudgetTooSmall(budget_s, budget_s - left + 4 * slowest)
                if not turns or 2 * slowest > left:
                    spent.stopped = BUDGET_SPENT
                    break
                block = (units[first_mover()],)  # one last pair (module docstring)
                spent.lone_pair, spent.stopped = True, BUDGET_SPENT  # once it has run
            for unit in block:
                for process in run_unit(unit, spent.plan.seconds, False, spent.plan.preheat_steps):
                    spent.values[process.label].append(process.value)
                    slowest = max(slowest, process.wall_s)
            planned = True
            if spent.stopped is None and until_ci is not None:
                spent.stopped = NARROW if narrow_enough(spent.values, until_ci, alpha, turns) else None
    except KeyboardInterrupt:
        spent.stopped = INTERRUPTED
    spent.elapsed_s = clock() - started
    return spent
