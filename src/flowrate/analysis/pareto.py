"""The Pareto frontier: the runs no other run beats on every objective at once.

A run dominates another when it is at least as good on every objective and strictly better on
one. The frontier is what is left when dominated runs are removed: the configurations worth
choosing between, each the best at some trade-off (throughput against energy, memory
and fidelity). Runs with equal figures on every objective do not dominate each other, so both stay.

Two guards keep the frontier's trade-offs real. Figures within TIE (1%) of each other are equal:
that is below what a measurement resolves (run-to-run spread of samples/s, a page-granular RSS
peak), so 1 MB less peak memory does not put a slower run on the frontier. And a run is ranked
only against runs of its own problem (flowrate.analysis.grouping): the frontier of several
problems is the union of each problem's.

Default objectives: maximize samples/s, maximize samples/J, minimize peak memory, and minimize
the loss a `flowrate check` reached — each of the last three only when every run considered
records it (an objective some runs lack would silently drop them; the result says which was left
out and why). Objectives the user names are kept, and runs lacking them are excluded, by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from flowrate.analysis.grouping import by_problem
from flowrate.errors import FlowrateError
from flowrate.results.objectives import Objective, parse_objective

__all__ = ["Objective", "ParetoResult", "dominates", "pareto_front", "parse_objective", "tied"]
from flowrate.results.store import StoredRun

DEFAULT_OBJECTIVES = ("samples_per_sec", "samples_per_joule", "peak_memory_bytes", "final_loss")
ALWAYS = "samples_per_sec"
TIE = 0.01  # figures closer than this, relative to the larger, are equal: no trade-off


@dataclass(frozen=True)
class ParetoResult:
    objectives: list[Objective]
    front: list[StoredRun]  # non-dominated, best first on the first objective
    dominated: list[StoredRun]
    values: dict[str, tuple[float, ...]]  # run id -> its value per objective, in order
    excluded: list[tuple[StoredRun, str]] = field(default_factory=list)  # run, why it was left out
    notes: list[str] = field(default_factory=list)  # default objectives left out, and why


def tied(x: float, y: float, tie: float = TIE) -> bool:
    """Whether x and y are within ``tie`` of the larger in magnitude: equal as far as measured."""
    return abs(x - y) <= tie * max(abs(x), abs(y))


def dominates(a: Sequence[float], b: Sequence[float], maximize: Sequence[bool], tie: float = TIE) -> bool:
    """Whether a is at least as good as b everywhere and better somewhere, figures ``tied`` being equal."""
    better = False
    for x, y, up in zip(a, b, maximize, strict=True):
        if tied(x, y, tie):
            continue
        if (x < y) if up else (x > y):
            return False
        better = True
    return better


def pareto_front(runs: Sequence[StoredRun], objectives: Sequence[Objective] | None = None) -> ParetoResult:
    """Split ``runs`` into the frontier and the dominated, over ``objectives`` (default: see module)."""
    objectives, notes = choose_objectives(runs, objectives)
    values, candidates, excluded = measured(runs, objectives)

    maximize = [o.maximize for o in objectives]
    front: list[StoredRun] = []
    dominated: list[StoredRun] = []
    groups = by_problem(candidates)
    for _, group in groups:  # each problem's frontier, best first on the first objective
        unbeaten = [r for r in group if not _beaten(r, group, values, maximize)]
        unbeaten.sort(key=lambda r: values[r.run_id][0], reverse=objectives[0].maximize)
        front += unbeaten
        kept = {id(r) for r in unbeaten}
        dominated += [r for r in group if id(r) not in kept]
    if len(groups) > 1:
        notes.append(
            f"ranked within each of the {len(groups)} problems: a run is compared only with runs of its "
            "own problem"
        )
    return ParetoResult(list(objectives), front, dominated, values, excluded, notes)


def choose_objectives(
    runs: Sequence[StoredRun], objectives: Sequence[Objective] | None
) -> tuple[list[Objective], list[str]]:
    """The objectives given (checked), or the defaults these runs record; and notes on what was left out."""
    if not runs:
        raise FlowrateError("no runs to rank: record some with `flowrate run` or `flowrate sweep`")
    notes: list[str] = []
    if objectives is None:
        objectives = _default_objectives(runs, notes)
    if not objectives:
        raise FlowrateError("give at least one objective, e.g. --objective samples_per_sec:max")
    names = [o.name for o in objectives]
    if len(set(names)) != len(names):
        raise FlowrateError(f"an objective is named twice: {', '.join(names)}")
    return list(objectives), notes


def measured(
    runs: Sequence[StoredRun], objectives: Sequence[Objective]
) -> tuple[dict[str, tuple[float, ...]], list[StoredRun], list[tuple[StoredRun, str]]]:
    """Each run's value per objective; the runs that record them all; the others, with why."""
    values: dict[str, tuple[float, ...]] = {}
    candidates: list[StoredRun] = []
    excluded: list[tuple[StoredRun, str]] = []
    for run in runs:
        vector = [o.metric.value(run.result) for o in objectives]
        missing = [o.metric.label for o, v in zip(objectives, vector, strict=True) if v is None]
        if missing:
            excluded.append((run, f"no {', '.join(missing)} recorded"))
            continue
        values[run.run_id] = tuple(float(v) for v in vector if v is not None)
        candidates.append(run)
    if not candidates:
        raise FlowrateError(
            "no run records every objective ("
            + ", ".join(str(o) for o in objectives)
            + "): choose objectives the runs have"
        )
    return values, candidates, excluded


def _beaten(
    run: StoredRun, rivals: Sequence[StoredRun], values: dict[str, tuple[float, ...]], maximize: list[bool]
) -> bool:
    """Whether another of ``rivals`` dominates ``run``."""
    return any(dominates(values[o.run_id], values[run.run_id], maximize) for o in rivals if o is not run)


def _default_objectives(runs: Sequence[StoredRun], notes: list[str]) -> list[Objective]:
    chosen = []
    for name in DEFAULT_OBJECTIVES:
        objective = parse_objective(name)
        if name == ALWAYS:
            chosen.append(objective)
            continue
        have = sum(objective.metric.value(r.result) is not None for r in runs)
        if have == len(runs):
            chosen.append(objective)
        elif have:
            notes.append(
                f"{objective.metric.label} left out of the objectives: recorded for {have} of {len(runs)} "
                f"runs (name it with --objective {name} to rank only the runs that have it)"
            )
    return chosen
