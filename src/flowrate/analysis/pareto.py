"""The Pareto frontier: the runs no other run beats on every objective at once.

A run dominates another when it is at least as good on every objective and strictly better on
one. The frontier is what is left when dominated runs are removed: the configurations worth
choosing between, each the best at some trade-off (seed 003: throughput against energy, memory
and fidelity). Runs with equal figures on every objective do not dominate each other, so both stay.

Default objectives: maximize samples/s, maximize samples/J, minimize peak memory, and minimize
the loss a `flowrate check` reached — each of the last three only when every run considered
records it (an objective some runs lack would silently drop them; the result says which was left
out and why). Objectives the user names are kept, and runs lacking them are excluded, by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from flowrate.errors import FlowrateError
from flowrate.results.metrics import Metric, get_metric
from flowrate.results.store import StoredRun

DEFAULT_OBJECTIVES = ("samples_per_sec", "samples_per_joule", "peak_memory_bytes", "final_loss")
ALWAYS = "samples_per_sec"


@dataclass(frozen=True)
class Objective:
    metric: Metric
    maximize: bool

    @property
    def name(self) -> str:
        return self.metric.name

    def __str__(self) -> str:
        return f"{'max' if self.maximize else 'min'} {self.metric.label}"


def parse_objective(text: str) -> Objective:
    """``samples_per_sec``, ``samples_per_sec:max`` or ``peak_memory_bytes:min``."""
    name, _, direction = text.partition(":")
    metric = get_metric(name)
    direction = direction.strip().lower()
    if direction in ("", "auto"):
        return Objective(metric, metric.higher_is_better)
    if direction not in ("max", "min"):
        raise FlowrateError(f"objective {text!r}: the direction after ':' must be max or min")
    return Objective(metric, direction == "max")


@dataclass(frozen=True)
class ParetoResult:
    objectives: list[Objective]
    front: list[StoredRun]  # non-dominated, best first on the first objective
    dominated: list[StoredRun]
    values: dict[str, tuple[float, ...]]  # run id -> its value per objective, in order
    excluded: list[tuple[StoredRun, str]] = field(default_factory=list)  # run, why it was left out
    notes: list[str] = field(default_factory=list)  # default objectives left out, and why


def dominates(a: Sequence[float], b: Sequence[float], maximize: Sequence[bool]) -> bool:
    """Whether a is at least as good as b everywhere and strictly better somewhere."""
    better = False
    for x, y, up in zip(a, b, maximize, strict=True):
        if (x < y) if up else (x > y):
            return False
        better = better or x != y
    return better


def pareto_front(runs: Sequence[StoredRun], objectives: Sequence[Objective] | None = None) -> ParetoResult:
    """Split ``runs`` into the frontier and the dominated, over ``objectives`` (default: see module)."""
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

    maximize = [o.maximize for o in objectives]
    front: list[StoredRun] = []
    dominated: list[StoredRun] = []
    for run in candidates:
        beaten = any(
            dominates(values[other.run_id], values[run.run_id], maximize)
            for other in candidates
            if other is not run
        )
        (dominated if beaten else front).append(run)
    first = objectives[0]
    front.sort(key=lambda r: values[r.run_id][0], reverse=first.maximize)
    return ParetoResult(list(objectives), front, dominated, values, excluded, notes)


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
