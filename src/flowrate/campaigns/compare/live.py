"""Two sides measured now, interleaved, each run recorded as it ends, then compared.

Each side is the options of a `flowrate run`, checked by this checkout (or, at a git revision,
by the revision's own code). The sides run alternately, A B B A …, each run a fresh process
(flowrate.campaigns.compare.interleave), and each is recorded in the store as it ends, tagged
compare:ID:A or compare:ID:B, so an interrupted comparison loses nothing and `flowrate compare
compare:ID:A compare:ID:B` compares it again. The comparison is the one `flowrate compare` makes
over recorded runs (flowrate.results.compare). Within a time budget (compare_within_budget) the
runs' count and length come from a plan (flowrate.campaigns.compare.budgeted), and throughput is
tested over the A B B A blocks (flowrate.results.blocks); where both sides run this checkout on the
CPU (takes_turns), each block is two pairs of processes that take turns interval by interval
(flowrate.campaigns.process.turns), tested pair by pair (flowrate.results.turns). A budget's
compared runs are tagged with how they ran (flowrate.results.run_design), so that comparing
them again pairs them as the budget did.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowrate.campaigns.compare.budgeted import Process, Spent, budget_report, pilot_seconds, spend
from flowrate.campaigns.compare.interleave import (
    INTERRUPTED,
    SEQUENTIAL_ALPHA_SHARE,
    Interleaved,
    StoppingRule,
    interleave,
)
from flowrate.campaigns.compare.plan import Plan
from flowrate.campaigns.compare.revisions import Revision, run_at
from flowrate.campaigns.process import child
from flowrate.config import RunConfig
from flowrate.config.values import AUTO
from flowrate.errors import RunFailed
from flowrate.process_clock import command_start
from flowrate.results.compare import Comparison, History, compare
from flowrate.results.metrics import METRICS
from flowrate.results.noise import history_in_store
from flowrate.results.per_process import process_values
from flowrate.results.run_design import RunDesign, design_tag
from flowrate.results.schema import Result
from flowrate.results.store import Store

# what a budget is counted by (a test may count differently)
clock: Callable[[], float] = time.monotonic


@dataclass(frozen=True)
class Side:
    label: str  # "A" or "B"
    spec: str  # as the user wrote it
    tokens: list[str]  # the spec as `flowrate run` arguments
    config: RunConfig | None  # checked by this checkout; None at a revision (its own code checks it)
    revision: Revision | None = None

    @property
    def argv(self) -> list[str]:
        """The `flowrate run` command the side's runs are recorded with."""
        return ["flowrate", "run", *self.tokens]

    def sets(self, flag: str) -> bool:
        """Whether the spec gives ``flag`` itself."""
        return any(t.split("=")[0] == flag for t in self.tokens)

    def measuring(self, seconds: float, preheat: int | None = None) -> Side:
        """The side with each run measuring ``seconds`` (`--duration`), as a budget's plan says:
        and, unless the spec sets --min-steps, at least one step (`--min-steps 1`), so that the
        seconds, not the default least number of steps, set a slow model's length; with
        ``preheat`` warm-up steps (`--preheat`) unless the spec sets its own."""
        own = self.sets("--min-steps")
        tokens = [*self.tokens, "--duration", f"{seconds:g}", *([] if own else ["--min-steps", "1"])]
        warm = None if self.sets("--preheat") else preheat
        tokens += [] if warm is None else ["--preheat", str(warm)]
        config = self.config
        if config is not None:
            config = dataclasses.replace(config, duration_s=seconds, min_steps=config.min_steps if own else 1)
            if warm is not None:
                config = dataclasses.replace(config, preheat_steps=warm)
        return dataclasses.replace(self, tokens=tokens, config=config)


@dataclass(frozen=True)
class LiveRun:
    """One run as it is recorded: its number in the comparison, its side, its median throughput."""

    number: int
    label: str
    samples_per_sec: float
    run_id: str


@dataclass(frozen=True)
class LiveComparison:
    """How the comparison ended: the runs' values and why they stopped, the comparison (None
    unless both sides recorded a run), and where the runs are, under which tags."""

    done: Interleaved
    comparison: Comparison | None
    recorded: int  # runs recorded, both sides
    labels: tuple[str, str]  # the tags of side A and side B
    store: Path
    budget: Spent | None = None  # with a budget: how it was spent

    @property
    def interrupted(self) -> bool:
        return self.done.stopped == INTERRUPTED

    @property
    def budget_report(self) -> dict[str, Any] | None:
        """With a budget and a comparison: how the budget was spent, for the JSON
        (flowrate.campaigns.compare.budgeted.budget_report)."""
        if self.budget is None or self.comparison is None:
            return None
        return budget_report(self.budget, self.comparison)


def compare_now(
    rule: StoppingRule,
    sides: list[Side],
    store: str | None,
    *,
    test: str,
    min_effect: float,
    history: bool = True,
    on_run: Callable[[LiveRun], None] = lambda run: None,
) -> LiveComparison:
    """Run the sides interleaved until ``rule`` stops, record each run (``on_run`` hears of it),
    then compare them at the rule's alpha. With ``history``, a fixed number of runs is judged with
    the store's between-run noise for the configuration too (flowrate.results.verdict pools it);
    a sequential rule (--until-ci) is not, as its error rate was set for the runs' own spread.
    A failed run raises RunFailed (what was recorded stays); an interrupt (Ctrl-C) ends the runs
    and comes back as ``interrupted``."""
    name = f"compare:{secrets.token_hex(4)}"
    labels = (f"{name}:A", f"{name}:B")
    results: dict[str, list[Result]] = {"A": [], "B": []}
    with Store(store) as opened:
        done = _interleave(rule, sides, opened, name, results, on_run)
        where = opened.path
    both = bool(results["A"] and results["B"])
    known = (
        history_in_store(where, results["A"], results["B"])
        if both and history and not rule.sequential
        else None
    )
    comparison = _compared(
        results, labels, test=test, alpha=rule.verdict_alpha, min_effect=min_effect, history=known
    )
    recorded = _count(results)
    return LiveComparison(done, comparison, recorded, labels, where)


def compare_within_budget(
    budget_s: float,
    sides: list[Side],
    store: str | None,
    *,
    alpha: float,
    min_effect: float,
    until_ci: float | None = None,
    on_first_block: Callable[[float], None] = lambda seconds: None,
    on_run: Callable[[LiveRun], None] = lambda run: None,
    on_plan: Callable[[Plan], None] = lambda chosen: None,
    wanted: float | None = None,
) -> LiveComparison:
    """Spend ``budget_s`` seconds, counted from the command's start (flowrate.process_clock), on the
    sides (flowrate.campaigns.compare.budgeted: a first block, a plan, A B B A blocks), record each
    run (``on_first_block`` hears of the first block's seconds a process before it runs, ``on_run``
    of each run, ``on_plan`` of the plan once made), then compare the planned runs
    with the throughput paired by block where the machine drifted (flowrate.results.blocks; with
    under three runs a side, the noise the plan used stands in for their spread), at
    ``alpha`` (a sequential ``until_ci`` rule: at half of it, as interleave says why). A failed
    run raises RunFailed; BudgetTooSmall when the budget leaves no room for two processes a side
    after the first block; an interrupt comes back as ``interrupted``. ``wanted``: the half-width
    of B/A's interval the user asked for, which the plan says the budget of where its own is wider
    (flowrate.campaigns.compare.plan.Plan.wanting). Where the sides can take turns (takes_turns),
    they do, and the throughput is paired by pair, the first block's pairs among them."""
    on_first_block(pilot_seconds(budget_s))
    name = f"compare:{secrets.token_hex(4)}"
    labels = (f"{name}:A", f"{name}:B")
    results: dict[str, list[Result]] = {"A": [], "B": []}
    level = alpha if until_ci is None else alpha * SEQUENTIAL_ALPHA_SHARE
    started = clock() - (time.monotonic() - command_start())
    turns = takes_turns(sides)
    with Store(store) as opened:
        design = RunDesign.TURNS if turns else RunDesign.BLOCKS
        runs = _BudgetRuns(_Recorder(sides, opened, name, results, on_run, design), opened.path)
        spent = spend(
            budget_s,
            clock=clock,
            started=started,
            run_one=runs.run_one,
            history_of=runs.history,
            alpha=level,
            until_ci=until_ci,
            on_plan=on_plan,
            own_preheat=any(side.sets("--preheat") for side in sides),
            wanted=wanted,
            run_pair=runs.run_pair if turns else None,
        )
    compared = results
    if turns and spent.plan is not None:  # the first block's pairs are compared too (budgeted)
        compared = {s: runs.pilot[s] + results[s] for s in "AB"}
    comparison = _compared(
        compared, labels, alpha=level, min_effect=min_effect, history=spent.history, blocks=True, turns=turns
    )
    done = Interleaved(spent.values, spent.stopped)
    recorded = _count(runs.pilot) + _count(results)
    return LiveComparison(done, comparison, recorded, labels, runs.where, spent)


def takes_turns(sides: Sequence[Side]) -> bool:
    """Whether the sides' processes can take turns (flowrate.campaigns.process.turns): both run
    this checkout (a revision's own code may not know how), on the CPU (two processes on one GPU
    would hold two models in its memory), without a data loader (its workers would go on working
    while their process waits for its turn)."""
    import torch

    for side in sides:
        config = side.config
        if side.revision is not None or config is None or config.data_dir is not None:
            return False
        if config.device.startswith("cuda") or (config.device == AUTO and torch.cuda.is_available()):
            return False
    return True


@dataclass(frozen=True)
class _BudgetRuns:
    """A budget's processes as flowrate.campaigns.compare.budgeted.spend runs them, one at a time
    or in pairs that take turns: each recorded (the first block's in ``pilot``), and the store's
    noise for the first block's configuration."""

    record: _Recorder
    where: Path
    pilot: dict[str, list[Result]] = dataclasses.field(default_factory=lambda: {"A": [], "B": []})

    def run_one(self, label: str, seconds: float, first: bool, preheat: int | None) -> Process:
        before = clock()
        result = self.record.one(label, seconds, self.pilot if first else None, preheat)
        return _process(label, result, seconds, clock() - before)

    def run_pair(
        self, first: str, second: str, seconds: float, pilot: bool, preheat: int | None
    ) -> tuple[Process, Process]:
        """Two processes that take turns, ``first`` holding the first turn: each is given half the
        pair's wall time (the budget pays for both at once)."""
        before = clock()
        x, y = self.record.pair(first, second, seconds, self.pilot if pilot else None, preheat)
        wall = (clock() - before) / 2
        return _process(first, x, seconds, wall), _process(second, y, seconds, wall)

    def history(self) -> History | None:
        return history_in_store(self.where, self.pilot["A"], self.pilot["B"])


def _process(label: str, result: Result, seconds: float, wall: float) -> Process:
    """A recorded run as the budget sees it, given the wall time it took of the budget."""
    value = process_values(METRICS["samples_per_sec"], result)[0]
    s = result.summary
    measured = s.timed_duration_s or seconds
    step_s = s.timed_duration_s / s.timed_steps if s.timed_steps else None
    counted = result.flops.executed_flops_per_sample is not None
    return Process(label, value, wall, measured, s.cv, seconds, step_s, s.preheat_steps, counted)


def _compared(
    results: dict[str, list[Result]],
    labels: tuple[str, str],
    *,
    alpha: float,
    min_effect: float,
    history: History | None,
    test: str = "welch",
    blocks: bool = False,
    turns: bool = False,
) -> Comparison | None:
    """B's recorded runs against A's (flowrate.results.compare); None unless both sides have one."""
    if not results["A"] or not results["B"]:
        return None
    return compare(
        results["A"],
        results["B"],
        test=test,
        alpha=alpha,
        min_effect=min_effect,
        labels=labels,
        history=history,
        blocks=blocks,
        turns=turns,
    )


def _interleave(
    rule: StoppingRule,
    sides: list[Side],
    store: Store,
    name: str,
    results: dict[str, list[Result]],
    on_run: Callable[[LiveRun], None],
) -> Interleaved:
    """The runs, each recorded as it ends; a failed run ends the comparison (what was recorded stays)."""
    record = _Recorder(sides, store, name, results, on_run)
    throughput = METRICS["samples_per_sec"]
    return interleave(rule, lambda label: process_values(throughput, record.one(label, None, None, None))[0])


@dataclass(frozen=True)
class _Recorder:
    """Runs a side's processes, one at a time or a pair taking turns, in fresh processes: each
    recorded in the store as it ends and appended to its side's list in ``results`` (or, given
    ``pilot``, in it, tagged NAME:pilot), ``on_run`` told. A side's process measures ``seconds``
    with ``preheat`` warm-up steps where given (Side.measuring). A failed run raises RunFailed once
    the runs that did not fail are recorded."""

    sides: Sequence[Side]
    store: Store
    name: str
    results: dict[str, list[Result]]
    on_run: Callable[[LiveRun], None]
    design: RunDesign | None = None  # how a budget's compared runs ran, tagged on each (run_design)

    def one(
        self, label: str, seconds: float | None, pilot: dict[str, list[Result]] | None, preheat: int | None
    ) -> Result:
        side = self._side(label, seconds, preheat)
        if side.revision is not None:
            outcome = run_at(side.revision, side.tokens)
        else:
            assert side.config is not None
            outcome = child.run_in_fresh_process(side.config, argv=side.argv)
        return self._keep([(side, outcome)], pilot)[0]

    def pair(
        self,
        first: str,
        second: str,
        seconds: float,
        pilot: dict[str, list[Result]] | None,
        preheat: int | None,
    ) -> tuple[Result, Result]:
        x, y = self._side(first, seconds, preheat), self._side(second, seconds, preheat)
        assert x.config is not None and y.config is not None
        outcomes = child.run_in_turns(x.config, y.config, argv=(x.argv, y.argv))
        kept = self._keep([(x, outcomes[0]), (y, outcomes[1])], pilot, compared=True)
        return kept[0], kept[1]

    def _side(self, label: str, seconds: float | None, preheat: int | None) -> Side:
        side = next(side for side in self.sides if side.label == label)
        return side if seconds is None else side.measuring(seconds, preheat)

    def _keep(
        self,
        runs: list[tuple[Side, child.ChildOutcome]],
        pilot: dict[str, list[Result]] | None,
        compared: bool = False,
    ) -> list[Result]:
        """Record each run that succeeded, in order; then RunFailed for the first that did not.
        A compared run is tagged NAME, NAME:A or NAME:B, and with a budget NAME:blocks or
        NAME:turns (flowrate.results.run_design). A first block's run is tagged NAME:pilot, and is
        compared where it is ``compared`` (a pair's: flowrate.campaigns.compare.budgeted)."""
        throughput = METRICS["samples_per_sec"]
        kept: list[Result] = []
        failed: str | None = None
        for side, outcome in runs:
            number = _count(self.results) + _count(pilot or {}) + 1
            if outcome.result is None:
                failed = (
                    failed
                    or f"run {number} (side {side.label}: flowrate run {side.spec}) failed: {outcome.message}"
                )
                continue
            tags = [self.name]
            if pilot is None or compared:
                tags.append(f"{self.name}:{side.label}")
                tags += [] if self.design is None else [design_tag(self.name, self.design)]
            self.store.add(outcome.result, tags + ([f"{self.name}:pilot"] if pilot is not None else []))
            (pilot if pilot is not None else self.results)[side.label].append(outcome.result)
            value = process_values(throughput, outcome.result)[0]
            self.on_run(LiveRun(number, side.label, value, outcome.result.run_id))
            kept.append(outcome.result)
        if failed is not None:
            recorded = _count(self.results) + _count(pilot or {})
            raise RunFailed(f"{failed}; the {recorded} runs before it are recorded, tagged {self.name}")
        return kept


def _count(sides: dict[str, list[Result]]) -> int:
    """The runs of both sides."""
    return sum(len(runs) for runs in sides.values())
