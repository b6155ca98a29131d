"""A configuration's samples/s over the code's history, and the steps in it.

Runs are grouped by configuration on a machine (flowrate.results.noise.configuration_key: a
series mixing batch sizes or machines would show steps that are not the code's). Within a group
each process (a run, or each repeat of a --repeat run) is one value, its median samples/s. When
every run records the commit of the flowrate checkout it ran (the environment's flowrate.commit;
a dirty tree is its own point), points are commits, each the mean of its processes, in the order
each commit was first recorded. Otherwise points are runs in time order, and the series says so.
flowrate.analysis.steps fits the steps; ``history`` is what `flowrate history` shows: the series,
their steps and the regressions a CI gate fails on.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from flowrate.analysis.steps import StepFit, detect_steps
from flowrate.errors import FlowrateError
from flowrate.results.compare import configuration, problem_identity
from flowrate.results.noise import ProcessPoint, configuration_key, machine, process_points
from flowrate.results.schema import Result

SHORT_COMMIT = 10


@dataclass(frozen=True)
class Point:
    """One commit (or one run, in time order): the mean samples/s of its processes."""

    label: str  # the commit (short, "+dirty" for a dirty tree) or the run id
    commit: str | None
    first_recorded: str  # ISO time of its first run
    runs: int  # processes
    samples_per_sec: float
    run_ids: list[str]


@dataclass(frozen=True)
class Series:
    """One configuration on one machine, point by point, with its steps once fitted."""

    problem: dict[str, object]
    configuration: dict[str, object]
    machine: dict[str, object]
    ordered_by: str  # "commit" or "time"
    points: list[Point]
    notes: list[str] = field(default_factory=list)
    fit: StepFit | None = None

    @property
    def title(self) -> str:
        shape = ", ".join(
            f"{k}={v}" for k, v in {**self.problem, **self.configuration}.items() if v is not None
        )
        where = self.machine.get("device_name") or self.machine.get("hostname") or "?"
        return f"{shape} on {where}"


def _label(p: ProcessPoint) -> str:
    short = (p.commit or "")[:SHORT_COMMIT]
    return short + ("+dirty" if p.dirty else "")


def _points(points: Sequence[ProcessPoint], by_commit: bool) -> list[Point]:
    groups: dict[str, list[ProcessPoint]] = {}
    for p in sorted(points, key=lambda q: q.created_at):
        groups.setdefault(_label(p) if by_commit else p.run_id, []).append(p)
    return [
        Point(
            label=label,
            commit=members[0].commit,
            first_recorded=members[0].created_at,
            runs=len(members),
            samples_per_sec=statistics.fmean(m.value for m in members),
            run_ids=list(dict.fromkeys(m.run_id for m in members)),
        )
        for label, members in groups.items()
    ]


def build_series(results: Iterable[Result]) -> list[Series]:
    """The series of each configuration on each machine, most points first."""
    groups: dict[str, tuple[Result, list[ProcessPoint]]] = {}
    for result in results:
        groups.setdefault(configuration_key(result), (result, []))[1].extend(process_points(result))
    series = []
    for first, points in groups.values():
        if not points:
            continue
        missing = sum(p.commit is None for p in points)
        notes = []
        if missing:
            notes.append(
                f"{missing} of {len(points)} runs record no commit: points are runs in time order "
                "(run from a git checkout of flowrate to order them by commit)"
            )
        series.append(
            Series(
                problem=problem_identity(first),
                configuration=configuration(first),
                machine=machine(first),
                ordered_by="time" if missing else "commit",
                points=_points(points, by_commit=not missing),
                notes=notes,
            )
        )
    return sorted(series, key=lambda s: -len(s.points))


def with_steps(series: Series) -> Series:
    """The series with its steps fitted (it needs two points or more)."""
    fit = detect_steps([p.samples_per_sec for p in series.points], [p.runs for p in series.points])
    return replace(series, fit=fit)


def regressions(series: Series, max_drop: float) -> list[int]:
    """Indexes into ``series.fit.steps`` of the drops over ``max_drop`` (0.05 = 5%) that the
    series has not recovered from: its last level is still more than ``max_drop`` under the level
    before the drop. A drop later undone is history, not a regression to fail on."""
    if series.fit is None:
        return []
    last = series.fit.levels[-1]
    return [
        k
        for k, step in enumerate(series.fit.steps)
        if step.relative < -max_drop and last < step.before * (1 - max_drop)
    ]


@dataclass(frozen=True)
class History:
    """The series of two points or more (steps fitted when asked), the series of one point left
    out, and each regression found as (series, index into its ``fit.steps``)."""

    series: list[Series]
    left_out: list[Series]
    regressions: list[tuple[Series, int]]


def history(results: Iterable[Result], *, detect: bool = False, max_drop: float | None = None) -> History:
    """The history of ``results``: steps fitted with ``detect`` or ``max_drop``, and with
    ``max_drop`` (0.05 = 5%) the drops not recovered from. Refuses results that make no series of
    two points (FlowrateError, naming the one point there is)."""
    built = build_series(results)
    series = [s for s in built if len(s.points) > 1]
    if not series:
        only = built[0].points[0] if built and built[0].points else None
        what = f" ({only.label})" if only else ""
        raise FlowrateError(
            f"a history needs 2 points or more; the runs that match make one{what}: record runs at "
            "other commits, or widen the filters"
        )
    if detect or max_drop is not None:
        series = [with_steps(s) for s in series]
    found = [(s, k) for s in series for k in regressions(s, max_drop)] if max_drop is not None else []
    return History(series, [s for s in built if len(s.points) == 1], found)
