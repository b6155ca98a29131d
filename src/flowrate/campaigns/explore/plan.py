"""An exploration's description and its records: the spec, the budget, one evaluation and its outcome.

The engine (flowrate.campaigns.explore.engine) hands batches of Evaluations (a point and the duration
to run it at) to an evaluate function and gets one Outcome back per evaluation. The real
function runs each point as a recorded run through an Executor (evaluate.py); a test or the
efficiency benchmark passes one that reads a recorded table, so the search can be scored
without starting a process.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flowrate.campaigns.explore.objectives import Constraint, Objective, measured_names
from flowrate.campaigns.explore.space import SearchSpace, study_id
from flowrate.campaigns.rungs.ladder import Continuation, Fidelity
from flowrate.config.values import BadValue, to_seconds
from flowrate.errors import ConfigError
from flowrate.results.store import point_key

DONE = "done"
OOM = "oom"  # out of memory: infeasible, not an error
FAILED = "failed"


@dataclass(frozen=True)
class Budget:
    """How much an exploration may spend: a number of runs, or seconds of wall time (all sessions)."""

    runs: int | None = None
    seconds: float | None = None

    @classmethod
    def parse(cls, text: str) -> Budget:
        """``12`` (runs) or ``2h``, ``90m``, ``600s`` (wall time)."""
        text = str(text).strip()
        if text.isascii() and text.isdigit() and int(text) > 0:
            return cls(runs=int(text))
        refused = ConfigError(
            "budget", f"cannot read {text!r}: give a number of runs (12) or a time (2h, 90m, 600s)"
        )
        if not text or text[-1].isdigit():  # a time names its unit: a bare number counts runs
            raise refused
        try:
            return cls(seconds=to_seconds(text))
        except BadValue:
            raise refused from None

    def room(self, runs: int, seconds: float) -> int:
        """How many more runs may start after ``runs`` runs that took ``seconds``."""
        if self.runs is not None:
            return max(self.runs - runs, 0)
        return 1 << 30 if self.seconds is None or seconds < self.seconds else 0

    def __str__(self) -> str:
        return f"{self.runs} runs" if self.runs is not None else f"{self.seconds:g} s"


@dataclass(frozen=True)
class ExploreSpec:
    """What an exploration searches: the space, what it optimizes, what it must respect, and how
    long each rung runs. Its identity (not the seed, budget or sampler) names its study."""

    space: SearchSpace
    objectives: tuple[Objective, ...]
    constraints: tuple[Constraint, ...] = ()
    fidelity: Fidelity = field(default_factory=lambda: Fidelity((10.0,)))
    name: str | None = None

    def identity(self) -> dict[str, Any]:
        return {
            **self.space.identity(),
            "objectives": [o.spec for o in self.objectives],
            "constraints": [str(c) for c in self.constraints],
            "durations": list(self.fidelity.durations),
        }

    @property
    def study_name(self) -> str:
        return self.name or f"explore-{study_id(self.identity())}"

    def fixed_steps(self, params: Mapping[str, Any]) -> int | None:
        """The timed steps that bound a point's run where they are set (a base steps, or a
        searched steps axis): such a run stops at its count, not at its rung's duration."""
        steps = params.get("steps", self.space.base.get("steps"))
        return int(steps) if steps is not None else None

    @property
    def metrics(self) -> list[str]:
        return measured_names(self.objectives, self.constraints)

    @property
    def continues(self) -> bool:
        """Whether a configuration's rungs run in one process (flowrate.campaigns.rungs.ladder's docstring):
        there is more than one rung and the run can read every figure at each."""
        return self.fidelity.top > 0 and not NOT_AT_A_RUNG.intersection(self.metrics)


# Figures a run cannot read at a rung inside it: energy and power are metered once, over the whole
# run; the loss a check reaches comes from a run of its own (evaluate.py's docstring).
NOT_AT_A_RUNG = frozenset({"samples_per_joule", "average_watts", "final_loss"})


@dataclass(frozen=True)
class Evaluation:
    """One point to run at one rung's duration, and on past it in the same process (``then``)."""

    params: dict[str, Any]
    duration_s: float
    rung: int
    then: Continuation | None = None


@dataclass(frozen=True)
class Outcome:
    """How an evaluation went: its figures (metric name -> value) with their standard errors, what
    it cost (seconds), and its recorded run; ``higher``: its outcomes at the rungs above that the
    same process went on to (each costing what it added)."""

    status: str  # DONE, OOM or FAILED
    values: dict[str, float] = field(default_factory=dict)
    noise: dict[str, float] = field(default_factory=dict)
    cost_s: float = 0.0
    run_id: str | None = None
    reason: str | None = None
    higher: tuple[Outcome, ...] = ()

    def to_attrs(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "values": self.values,
            "noise": self.noise,
            "cost_s": self.cost_s,
            "run_id": self.run_id,
            "reason": self.reason,
        }

    @classmethod
    def from_attrs(cls, attrs: dict[str, Any]) -> Outcome:
        return cls(
            attrs["status"],
            attrs["values"],
            attrs["noise"],
            attrs["cost_s"],
            attrs["run_id"],
            attrs["reason"],
        )


Evaluate = Callable[[Sequence[Evaluation]], list[Outcome]]


@dataclass(frozen=True)
class Evaluated:
    """An evaluation as the study recorded it (in this session or an earlier one)."""

    key: str
    params: dict[str, Any]
    rung: int
    duration_s: float
    outcome: Outcome
    violations: tuple[float, ...] = ()  # per constraint, ≤ 0 where it holds
    earlier: bool = False
    continued: bool = False  # measured as its run went on from the rung below: not a run of its own

    @property
    def feasible(self) -> bool:
        return self.outcome.status == DONE and all(v <= 0 for v in self.violations)

    def objective_values(self, objectives: Sequence[Objective]) -> tuple[float, ...]:
        return tuple(self.outcome.values[o.name] for o in objectives)

    def gains(self, objectives: Sequence[Objective]) -> tuple[float, ...]:
        """Each objective oriented so that larger is better."""
        return tuple(
            v if o.maximize else -v
            for v, o in zip(self.objective_values(objectives), objectives, strict=True)
        )

    def noise(self, objectives: Sequence[Objective]) -> tuple[float, ...]:
        return tuple(self.outcome.noise.get(o.name, 0.0) for o in objectives)


GP_MAX_SPACE = 4096  # points; a larger space goes to TPE (flowrate.campaigns.explore.study's docstring)
GP_MAX_RUNS = 64  # a budget of more runs (or in hours) goes to TPE: the GP's fits grow with trials


def sampler_kind(space: SearchSpace, budget: Budget) -> str:
    """The sampler ``auto`` picks for this space and budget (flowrate.campaigns.explore.study's
    docstring says why)."""
    runs = budget.runs or 0
    if runs >= 300:
        return "nsga2"
    return "gp" if 0 < runs <= GP_MAX_RUNS and space.size <= GP_MAX_SPACE else "tpe"


def default_initial(space: SearchSpace) -> int:
    """The initial design (points measured before the model guides the search): twice the axes,
    at least 4, and never more than a fifth of the space."""
    return max(1, min(max(4, 2 * len(space.axes)), math.ceil(space.size / 5)))


def space_filling(space: SearchSpace, count: int, rng: random.Random) -> list[dict[str, Any]]:
    """An initial design of ``count`` points spread over the space: a Latin hypercube over each
    axis's values (every value about equally often, in a random pairing across axes), so the
    model starts from every value of every axis, which independent random draws often miss in a
    design this small. A point drawn twice is kept once."""
    columns = []
    for axis in space.axes:
        size = len(axis.values)
        column = [axis.values[min(int((i + rng.random()) * size / count), size - 1)] for i in range(count)]
        rng.shuffle(column)
        columns.append(column)
    points: dict[str, dict[str, Any]] = {}
    for row in zip(*columns, strict=True):
        params = {axis.name: value for axis, value in zip(space.axes, row, strict=True)}
        points.setdefault(point_key(params), params)
    return list(points.values())


def check_budget(budget: Budget, initial: int) -> None:
    if budget.runs is not None and budget.runs < initial:
        raise ConfigError(
            "budget",
            f"{budget.runs} runs is less than the initial design ({initial}): give more, or less --initial",
        )
