"""What `flowrate explore` prints: a line per evaluation on stderr, the frontier table, its JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from flowrate.cli import console
from flowrate.units import DASH, compact, duration, gib

if TYPE_CHECKING:
    from flowrate.campaigns.explore.engine import ExploreOutcome
    from flowrate.campaigns.explore.plan import Budget, Evaluated, ExploreSpec


def _figure(name: str, value: float | None) -> str:
    if value is None:
        return DASH
    return gib(value) if name == "peak_memory_bytes" else compact(value)


def describe(params: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


class Display:
    """The exploration's listener: one status line per evaluation, with the budget spent."""

    def __init__(self, spec: ExploreSpec, budget: Budget, quiet: bool) -> None:
        self.spec, self.budget, self.quiet = spec, budget, quiet

    def begin(self, study: str, sampler: str, recorded: int, resumed: bool) -> None:
        earlier = f", resuming: {recorded} evaluations recorded" if resumed else ""
        console.status(
            f"explore {study}: {self.spec.space.size} points, budget {self.budget}, {sampler}, "
            f"runs of {run_lengths(self.spec)}{earlier}",
            self.quiet,
        )

    def recorded(self, evaluated: Evaluated, runs: int, seconds: float) -> None:
        outcome = evaluated.outcome
        if outcome.status == "done":
            what = ", ".join(f"{m}={_figure(m, outcome.values.get(m))}" for m in self.spec.metrics)
            what += "" if evaluated.feasible else " (breaks a constraint)"
        else:
            what = f"{outcome.status}: {outcome.reason}"
        spent = f"{runs}/{self.budget.runs}" if self.budget.runs is not None else duration(seconds)
        where = f"rung {evaluated.rung} ({run_length(self.spec, evaluated)})"
        console.status(
            f"[{spent}] {where} {describe(evaluated.params)}: {what}",
            self.quiet,
        )


def run_length(spec: ExploreSpec, evaluated: Evaluated) -> str:
    """What bounded an evaluation's run: its step count where one is set, else its rung's seconds."""
    steps = spec.fixed_steps(evaluated.params)
    return f"{steps} steps" if steps is not None else f"{evaluated.duration_s:g} s"


def run_lengths(spec: ExploreSpec) -> str:
    """What bounds the exploration's runs: a step count (set, or searched), else each rung's seconds."""
    if "steps" in spec.space.names:
        return "the searched steps"
    steps = spec.space.base.get("steps")
    if steps is not None:
        return f"{steps} steps"
    return ", ".join(f"{d:g} s" for d in spec.fidelity.durations)


def title(spec: ExploreSpec, outcome: ExploreOutcome) -> str:
    objectives = ", ".join(o.spec for o in spec.objectives)
    return (
        f"explore {outcome.study}: frontier of {objectives} ({outcome.runs} runs, {duration(outcome.seconds)}"
        f"{', every point measured' if outcome.exhausted else ''})"
    )


def figure_columns(spec: ExploreSpec) -> range:
    start = len(spec.space.names)
    return range(start, start + len(spec.metrics))


def frontier_table(spec: ExploreSpec, outcome: ExploreOutcome) -> tuple[list[str], list[list[str]]]:
    names = spec.space.names
    metrics = spec.metrics
    header = [*names, *metrics, "run"]
    rows = []
    for evaluated in outcome.frontier:
        row = [str(evaluated.params[n]) for n in names]
        row += [_figure(m, evaluated.outcome.values.get(m)) for m in metrics]
        rows.append([*row, evaluated.outcome.run_id or DASH])
    return header, rows


def _entry(evaluated: Evaluated, steps: int | None) -> dict[str, Any]:
    outcome = evaluated.outcome
    return {
        "params": evaluated.params,
        "rung": evaluated.rung,
        "duration_s": evaluated.duration_s,
        "steps": steps,  # the step count that bounded the run (then duration_s did not), or None
        "status": outcome.status,
        "feasible": evaluated.feasible,
        "values": outcome.values,
        "noise": outcome.noise,
        "run_id": outcome.run_id,
        "reason": outcome.reason,
    }


def to_json(spec: ExploreSpec, outcome: ExploreOutcome) -> str:
    document = {
        "study": outcome.study,
        "sampler": outcome.sampler,
        "objectives": [o.spec for o in spec.objectives],
        "constraints": [str(c) for c in spec.constraints],
        "durations_s": list(spec.fidelity.durations),
        "runs": outcome.runs,
        "seconds": outcome.seconds,
        "exhausted": outcome.exhausted,
        "frontier": [_entry(e, spec.fixed_steps(e.params)) for e in outcome.frontier],
        "evaluations": [_entry(e, spec.fixed_steps(e.params)) for e in outcome.evaluations],
    }
    return json.dumps(document, indent=2, default=str)


def no_frontier(outcome: ExploreOutcome) -> str:
    failed = [e for e in outcome.evaluations if e.outcome.status != "done"]
    why = f"; the first failure: {failed[0].outcome.reason}" if failed else ""
    return f"no point measured at full length is feasible ({outcome.runs} runs){why}"
