"""A recorded grid as an evaluate function: how benchmarks/explore_efficiency.py (and the
exploration tests) score a search without running anything.

A grid table (JSON, written by measuring every point of a grid: benchmarks/record_grid.py, kept
in benchmarks/data/) holds each point's parameters, its figures' recorded mean and spread, its
wall time and whether it ran out of memory, plus the grid's run duration, preheat and minimum
steps (keys, else its recorded command's flags, else flowrate run's defaults). Replaying it, an
evaluation of a point draws each figure from a normal distribution around the recorded mean with
the recorded spread (seeded).

A search is replayed at a user's full length, not the table's: full runs last ``full_s``
(flowrate run's default duration unless set) with flowrate run's default preheat and minimum
steps, and the table's recorded duration is the shortest rung a multi-fidelity search can model
honestly, the only one whose spread was measured. A run's cost at any duration, as flowrate run
spends it: the point's own start-up (process, imports, model build: its recorded wall time less
its recorded preheat and timed steps), its preheat steps, and its timed steps, which last the
duration or the minimum steps, whichever is longer; a step's time is the batch over the recorded
throughput. A shorter rung runs proportionally fewer steps
(flowrate.campaigns.rungs.ladder.loop_steps, as flowrate.campaigns.explore.evaluate runs it for
real). An out-of-memory point costs its recorded wall time at any length (it fails in its first
steps). A configuration that goes on in its own process
(flowrate.campaigns.rungs.ladder.Continuation) pays its start-up and a full run's preheat
once, then each rung adds only its further timed steps. Every rung's figures are drawn with the
recorded spread: measured at the shortest rung, an upper bound for longer ones (a mean over more
steps varies less, but by how much was not measured, so no smaller spread is assumed).

A search is scored by the hypervolume of the points it measured at full length, taken at their
recorded means (what it found, not how lucky its draws were), as a fraction of the grid
frontier's: reference point the grid's worst value of each objective, 10% of the range further.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import random
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowrate.campaigns.explore.engine import Exploration
from flowrate.campaigns.explore.objectives import Objective
from flowrate.campaigns.explore.plan import (
    DONE,
    FAILED,
    OOM,
    Budget,
    Evaluated,
    Evaluation,
    ExploreSpec,
    Outcome,
)
from flowrate.campaigns.explore.space import Axis, SearchSpace
from flowrate.campaigns.rungs.ladder import Fidelity, loop_steps
from flowrate.config import RunConfig
from flowrate.errors import FlowrateError
from flowrate.results.store import point_key


@dataclass(frozen=True)
class TablePoint:
    params: dict[str, Any]
    figures: dict[str, tuple[float, float]]  # metric -> (mean, spread)
    wall_s: float
    status: str  # "done" or "oom"

    @property
    def step_s(self) -> float:
        """One step's time: the batch over the recorded throughput (0 when the table cannot tell)."""
        batch, rate = self.params.get("batch_size"), self.figures.get("samples_per_sec", (0.0, 0.0))[0]
        return batch / rate if isinstance(batch, int) and rate > 0 else 0.0


@dataclass(frozen=True)
class GridTable:
    duration_s: float
    startup_s: float
    points: dict[str, TablePoint]  # by point key
    source: dict[str, Any]  # problem, hardware, command, date: as recorded
    preheat_steps: int = RunConfig.preheat_steps
    min_steps: int = RunConfig.min_steps

    full_s: float = RunConfig.duration_s  # a full run's duration (module docstring)

    def startup(self, point: TablePoint) -> float:
        """A point's start-up: its recorded wall time less its recorded preheat and timed steps."""
        loop = self.preheat_steps * point.step_s + max(self.duration_s, self.min_steps * point.step_s)
        return max(point.wall_s - loop, 0.0)

    def cost(self, point: TablePoint, duration_s: float, goes_on: bool = False) -> float:
        """What a run of ``point`` at ``duration_s`` costs (module docstring); one that may go on
        to full length (``goes_on``) preheats as a full run does."""
        if point.status != DONE:
            return point.wall_s
        share = 1.0 if goes_on else min(duration_s / self.full_s, 1.0)
        preheat, _ = loop_steps(share, RunConfig.preheat_steps, RunConfig.min_steps)
        return self.startup(point) + preheat * point.step_s + self.timed(point, duration_s)

    def timed(self, point: TablePoint, duration_s: float) -> float:
        """A run's timed seconds at a rung of ``duration_s``: the duration or the rung's minimum
        steps, whichever is longer (also when a longer run passes the rung: where it is measured)."""
        share = min(duration_s / self.full_s, 1.0)
        _, min_steps = loop_steps(share, RunConfig.preheat_steps, RunConfig.min_steps)
        return max(duration_s, min_steps * point.step_s)

    def get(self, params: dict[str, Any]) -> TablePoint:
        """The point with these parameters (every key of the grid's)."""
        return self.points[point_key(params)]

    def space(self) -> SearchSpace:
        """The grid as a search space: each varied key an axis (doubling or contiguous integers
        numeric, anything else a list); keys with one value are the base."""
        keys = list(next(iter(self.points.values())).params)
        axes, base = [], {}
        for key in keys:
            values = sorted({p.params[key] for p in self.points.values()}, key=lambda v: (str(type(v)), v))
            if len(values) == 1:
                base[key] = values[0]
                continue
            ints = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
            doubling = ints and all(b == 2 * a for a, b in itertools.pairwise(values))
            contiguous = ints and values == list(range(values[0], values[-1] + 1))
            axes.append(Axis(key, tuple(values), doubling or contiguous, doubling and not contiguous))
        return SearchSpace(base, tuple(axes))


def load_table(path: str | Path) -> GridTable:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        points = {}
        for row in data["points"]:
            figures = {
                k: (float(v["mean"]), _spread(v))
                for k, v in row.items()
                if isinstance(v, dict) and "mean" in v
            }
            points[point_key(row["params"])] = TablePoint(
                row["params"], figures, float(row["wall_s"]), row["status"]
            )
        source = {k: data.get(k) for k in ("problem", "hardware", "command", "date")}
        preheat, min_steps = _loop_options(data)
        return GridTable(
            float(data["duration_s"]), float(data["startup_s"]), points, source, preheat, min_steps
        )
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise FlowrateError(f"cannot read the grid table {path}: {error}") from None


def _loop_options(data: dict[str, Any]) -> tuple[int, int]:
    """The grid's preheat and minimum timed steps: the table's keys, else its command's flags,
    else flowrate run's defaults."""
    words = shlex.split(str(data.get("command") or ""))

    def flag(name: str, default: int) -> int:
        return int(words[words.index(name) + 1]) if name in words[:-1] else default

    return (
        int(data.get("preheat_steps") or flag("--preheat", RunConfig.preheat_steps)),
        int(data.get("min_steps") or flag("--min-steps", RunConfig.min_steps)),
    )


def _spread(figure: dict[str, Any]) -> float:
    """A figure's recorded spread: its between-run sd, else (a grid measured once) the within-run
    sd of its intervals, wider than a run's mean varies (a cautious stand-in), else 0."""
    for key in ("sd", "interval_sd"):
        if figure.get(key) is not None:
            return float(figure[key])
    return 0.0


class TableEvaluator:
    """An evaluate function over a recorded grid (module docstring): seeded, and counting its cost."""

    def __init__(self, table: GridTable, params_base: dict[str, Any], seed: int) -> None:
        self.table = table
        self.base = params_base  # the grid's fixed keys, which a space's points leave out
        self.random = random.Random(seed)

    def __call__(self, batch: Sequence[Evaluation]) -> list[Outcome]:
        return [self.one(e) for e in batch]

    def one(self, evaluation: Evaluation) -> Outcome:
        table, then = self.table, evaluation.then
        point = table.points.get(point_key({**self.base, **evaluation.params}))
        if point is None:
            return Outcome(FAILED, reason="not in the grid table")
        cost = table.cost(point, evaluation.duration_s, goes_on=then is not None)
        if point.status != DONE:
            return Outcome(OOM, cost_s=cost, reason="out of memory (recorded)")
        outcome = self._draw(point, cost)
        if then is None:
            return outcome
        higher, last, step = [], outcome, 0  # the run goes on while nothing at its rung beats it
        while then.goes_on(step, last.values, last.noise):
            step += 1
            added = table.timed(point, then.durations[step]) - table.timed(point, then.durations[step - 1])
            last = self._draw(point, added)
            higher.append(last)
        return dataclasses.replace(outcome, higher=tuple(higher))

    def _draw(self, point: TablePoint, cost: float) -> Outcome:
        values, noise = {}, {}
        for name, (mean, spread) in point.figures.items():
            noise[name] = spread
            values[name] = self.random.gauss(mean, spread)
        return Outcome(DONE, values, noise, cost)


def hypervolume(points: Sequence[Sequence[float]], reference: Sequence[float]) -> float:
    """The volume that ``points`` (to be minimized) dominate up to ``reference``: exact, by slicing
    along the last objective (small sets: a search's points, a grid's frontier)."""
    inside = [tuple(p) for p in points if all(x < r for x, r in zip(p, reference, strict=True))]
    if not inside:
        return 0.0
    if len(reference) == 1:
        return reference[0] - min(p[0] for p in inside)
    inside.sort(key=lambda p: p[-1])
    volume = 0.0
    for i, point in enumerate(inside):
        upper = inside[i + 1][-1] if i + 1 < len(inside) else reference[-1]
        if upper > point[-1]:
            volume += (upper - point[-1]) * hypervolume([q[:-1] for q in inside[: i + 1]], reference[:-1])
    return volume


def _minimized(values: Sequence[float], objectives: Sequence[Objective]) -> tuple[float, ...]:
    return tuple(-v if o.maximize else v for v, o in zip(values, objectives, strict=True))


@dataclass(frozen=True)
class Scorer:
    """Hypervolume of sets of the grid's points, as a fraction of the whole grid's."""

    table: GridTable
    objectives: tuple[Objective, ...]
    reference: tuple[float, ...]
    grid_volume: float

    @classmethod
    def of(cls, table: GridTable, objectives: Sequence[Objective]) -> Scorer:
        done = [p for p in table.points.values() if p.status == DONE]
        means = [_minimized([p.figures[o.name][0] for o in objectives], objectives) for p in done]
        reference = []
        for i in range(len(objectives)):
            column = [m[i] for m in means]
            reference.append(max(column) + 0.1 * (max(column) - min(column)))
        volume = hypervolume(means, reference)
        return cls(table, tuple(objectives), tuple(reference), volume)

    def fraction(self, keys: Sequence[str]) -> float:
        """The hypervolume of these points (their recorded means) over the grid's."""
        points = [self.table.points[k] for k in keys if self.table.points[k].status == DONE]
        means = [_minimized([p.figures[o.name][0] for o in self.objectives], self.objectives) for p in points]
        return hypervolume(means, self.reference) / self.grid_volume


def trace(
    scorer: Scorer, evaluations: Sequence[Evaluated], top: int, base: dict[str, Any]
) -> list[tuple[float, float]]:
    """(compute seconds spent, hypervolume fraction of the full-length points so far) after each
    evaluation, in the order they ran."""
    spent, full, curve = 0.0, [], []
    for evaluated in evaluations:
        spent += evaluated.outcome.cost_s
        if evaluated.rung == top and evaluated.outcome.status == DONE:
            full.append(point_key({**base, **evaluated.params}))
        curve.append((spent, scorer.fraction(full) if full else 0.0))
    return curve


def time_to(curve: Sequence[tuple[float, float]], target: float) -> float:
    """The compute seconds at which the curve first reaches ``target`` (inf if never)."""
    return next((t for t, v in curve if v >= target - 1e-12), math.inf)


class EvaluationLog:
    """The evaluations in the order they ran (an ExploreListener)."""

    def __init__(self) -> None:
        self.items: list[Evaluated] = []

    def begin(self, study: str, sampler: str, recorded: int, resumed: bool) -> None:
        pass

    def recorded(self, evaluated: Evaluated, runs: int, seconds: float) -> None:
        self.items.append(evaluated)


def search(
    table: GridTable,
    objectives: Sequence[Objective],
    *,
    seed: int,
    budget: Budget,
    sampler: str = "auto",
    fidelity: Fidelity | None = None,
) -> list[Evaluated]:
    """One seeded search over the table (in memory): its evaluations in the order they ran."""
    space = table.space()
    spec = ExploreSpec(space, tuple(objectives), fidelity=fidelity or Fidelity((table.full_s,)))
    log = EvaluationLog()
    evaluate = TableEvaluator(table, space.base, seed)
    Exploration(spec, evaluate, budget=budget, seed=seed, sampler=sampler, listener=log).run()
    return log.items


def search_curve(table: GridTable, objectives: Sequence[Objective], **how: Any) -> list[tuple[float, float]]:
    """One seeded search's trace (compute seconds, hypervolume fraction); ``how``: search's
    keyword arguments."""
    fidelity = how.pop("fidelity", None) or Fidelity((table.full_s,))
    items = search(table, objectives, fidelity=fidelity, **how)
    return trace(Scorer.of(table, objectives), items, fidelity.top, table.space().base)
