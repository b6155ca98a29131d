"""Running a sweep: each point in a fresh process, recorded in the store as soon as it ends.

Why the skipping: within a branch (every key but batch_size equal) batch sizes run ascending
(flowrate.campaigns.sweep_spec), so when one runs out of memory every larger batch of that
branch is known not to fit and is recorded skipped instead of spending minutes failing. An
out-of-memory point is an expected outcome of a sweep, not an error.

Why it resumes: a sweep's identity is a hash of its base, grid and given name, and each point
is recorded (with its run, in one transaction) as soon as it ends, so the same sweep started
again runs only the points not yet recorded. A name the store holds for another grid is refused
(flowrate.campaigns.sweep_name): the two sweeps would merge under it.

Printing belongs to the CLI (flowrate/cli/sweep.py); this module reports through a listener.
"""

from __future__ import annotations

import time
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from flowrate.campaigns.child import CRASHED, ERROR, OOM, ChildCrash, ChildOutcome, run_in_fresh_process
from flowrate.campaigns.sweep_name import check_name
from flowrate.campaigns.sweep_spec import PlannedPoint, SweepSpec, plan_points
from flowrate.config import RunConfig
from flowrate.errors import FlowrateError

if typing.TYPE_CHECKING:
    from flowrate.results.store import Store, SweepPoint

# A recorded failure whose reason starts so was out of memory (it skips larger batches).
OOM_REASON = "out of memory"

PointRunner = Callable[[RunConfig], ChildOutcome]


def fresh_process_runner(argv: list[str] | None = None) -> PointRunner:
    """Runs each point in a newly spawned process; a bug in one point fails that point only."""

    def run(config: RunConfig) -> ChildOutcome:
        try:
            return run_in_fresh_process(config, argv=argv)
        except FlowrateError as error:
            return ChildOutcome(None, ERROR, str(error))
        except ChildCrash as crash:  # the last line of the child's traceback says what
            last = str(crash).strip().splitlines()[-1]
            return ChildOutcome(None, CRASHED, f"{last} (run it alone with `flowrate run` to see where)")

    return run


@dataclass(frozen=True)
class PointReport:
    """A point's outcome, as the sweep recorded it (now, or in an earlier session)."""

    index: int
    params: dict[str, Any]
    status: str  # done, failed or skipped
    run_id: str | None
    reason: str | None
    samples_per_sec: float | None = None
    earlier: bool = False  # recorded before this session (a resume)
    wall_s: float | None = None  # parent's wall time of a point run in this session

    @property
    def out_of_memory(self) -> bool:
        return _is_oom(self.status, self.reason)

    @property
    def failed_otherwise(self) -> bool:
        """Failed for a reason other than memory: a real failure of the sweep."""
        return self.status == "failed" and not self.out_of_memory


def _is_oom(status: str, reason: str | None) -> bool:
    return status == "failed" and reason is not None and reason.startswith(OOM_REASON)


@dataclass(frozen=True)
class SweepProgress:
    """Where a sweep stands: points recorded of the total, and the time the rest should take."""

    done: int
    total: int
    seconds_left: float | None  # None until a point has run in this session

    @property
    def left(self) -> int:
        return self.total - self.done


@dataclass(frozen=True)
class SweepStart:
    sweep_id: str
    name: str
    total: int
    recorded: int  # points recorded in earlier sessions and kept
    resumed: bool


class SweepListener(Protocol):
    """What a front end implements to show a sweep as it goes (the CLI's display, a test's log)."""

    def begin(self, start: SweepStart) -> None:
        """Before the first point."""

    def starting(self, point: PlannedPoint, progress: SweepProgress) -> None:
        """A point is about to run in its own process."""

    def recorded(self, report: PointReport, progress: SweepProgress) -> None:
        """A point was recorded: done, failed or skipped."""


class _Silent:
    def begin(self, start: SweepStart) -> None:
        pass

    def starting(self, point: PlannedPoint, progress: SweepProgress) -> None:
        pass

    def recorded(self, report: PointReport, progress: SweepProgress) -> None:
        pass


@dataclass
class SweepOutcome:
    sweep_id: str
    name: str
    reports: list[PointReport] = field(default_factory=list)

    @property
    def failed_otherwise(self) -> list[PointReport]:
        return [r for r in self.reports if r.failed_otherwise]

    @property
    def exit_status(self) -> int:
        """0 when every point is done or stopped by memory (an expected outcome); 1 otherwise."""
        return 1 if self.failed_otherwise else 0


def run_sweep(
    spec: SweepSpec,
    store: Store,
    *,
    tags: Sequence[str] = (),
    runner: PointRunner | None = None,
    listener: SweepListener | None = None,
    retry_failed: bool = False,
    argv: list[str] | None = None,
    clock: Callable[[], float] = time.monotonic,
    points: Sequence[PlannedPoint] | None = None,
) -> SweepOutcome:
    """Run every point of ``spec`` not yet recorded in ``store``, recording each as it ends.

    ``runner`` runs one point (default: in a fresh spawned process); tests pass a fake one.
    ``points``: the sweep's plan_points(spec), when the caller made it already. With
    ``retry_failed``, failed and skipped points are run again. An interrupt (Ctrl-C) stops
    the sweep between two records: nothing recorded is lost and the same call resumes it.
    A name the store holds for other options is a ConfigError("name"), before anything runs.
    """
    check_name(spec, store.sweeps())
    planned = plan_points(spec) if points is None else list(points)
    run = runner or fresh_process_runner(argv)
    listener = listener or _Silent()
    resumed = not store.open_sweep(spec.sweep_id, spec.label, spec.to_dict())
    recorded = store.sweep_points(spec.sweep_id)
    if retry_failed:
        recorded = {k: p for k, p in recorded.items() if p.status == "done"}
    point_tags = [*tags, f"sweep:{spec.label}"]
    state = _SweepState(planned, recorded)
    listener.begin(SweepStart(spec.sweep_id, spec.label, len(planned), state.kept, resumed))
    for position, point in enumerate(planned):
        earlier = recorded.get(point.key)
        if earlier is not None:
            state.reports.append(_earlier_report(point, earlier, store))
            continue
        blocker = _blocked_by(point, state.oom_at)
        if blocker is not None:
            reason = f"batch {point.batch} skipped: batch {blocker} ran out of memory on this branch"
            store.record_point(spec.sweep_id, point.params, "skipped", reason=reason)
            report = PointReport(point.index, point.params, "skipped", None, reason, wall_s=0.0)
        else:
            listener.starting(point, state.progress(position))
            began = clock()
            child = run(point.config)
            state.walls.append(clock() - began)
            report = _record(spec, store, point, child, point_tags, state.walls[-1])
            if report.out_of_memory:
                _remember_oom(state.oom_at, point)
        state.reports.append(report)
        listener.recorded(report, state.progress(position + 1))
    return SweepOutcome(spec.sweep_id, spec.label, state.reports)


@dataclass
class _SweepState:
    """One session's pass over the plan: what earlier sessions recorded, and what this one did."""

    planned: list[PlannedPoint]
    recorded: Mapping[str, SweepPoint]  # by point key, kept from earlier sessions
    reports: list[PointReport] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)  # wall time of each point run in this session
    # smallest batch that ran out of memory, per branch, from earlier sessions too
    oom_at: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for point in self.planned:
            earlier = self.recorded.get(point.key)
            if earlier is not None and _is_oom(earlier.status, earlier.reason):
                _remember_oom(self.oom_at, point)

    @property
    def kept(self) -> int:
        """Points of the plan recorded in earlier sessions."""
        return sum(p.key in self.recorded for p in self.planned)

    def progress(self, after: int) -> SweepProgress:
        """Where the sweep stands once the first ``after`` points of the plan are through."""
        done = self.kept + sum(not r.earlier for r in self.reports)
        to_run = sum(
            1
            for p in self.planned[after:]
            if p.key not in self.recorded and _blocked_by(p, self.oom_at) is None
        )
        left = sum(self.walls) / len(self.walls) * to_run if self.walls else None
        return SweepProgress(done, len(self.planned), left)


def _remember_oom(oom_at: dict[str, int], point: PlannedPoint) -> None:
    """Keep the smallest batch of the point's branch that ran out of memory."""
    if point.batch is not None:
        oom_at[point.branch] = min(oom_at.get(point.branch, point.batch), point.batch)


def _blocked_by(point: PlannedPoint, oom_at: Mapping[str, int]) -> int | None:
    """The smaller batch of this point's branch that ran out of memory, if any."""
    if point.batch is None:
        return None
    limit = oom_at.get(point.branch)
    return limit if limit is not None and point.batch > limit else None


def _record(
    spec: SweepSpec,
    store: Store,
    point: PlannedPoint,
    child: ChildOutcome,
    tags: Sequence[str],
    wall: float,
) -> PointReport:
    """Record one point (and its run) in one transaction; say how it went."""
    if child.result is not None:
        store.record_point(spec.sweep_id, point.params, "done", result=child.result, tags=tags)
        rate = child.result.summary.samples_per_sec
        return PointReport(point.index, point.params, "done", child.result.run_id, None, rate, wall_s=wall)
    message = child.message or "it failed without a message"
    if child.failure == OOM:
        reason = message if message.startswith(OOM_REASON) else f"{OOM_REASON}: {message}"
    elif child.failure == CRASHED:
        reason = f"crashed: {message}"
    else:
        reason = message
    store.record_point(spec.sweep_id, point.params, "failed", reason=reason)
    return PointReport(point.index, point.params, "failed", None, reason, wall_s=wall)


def _earlier_report(point: PlannedPoint, earlier: SweepPoint, store: Store) -> PointReport:
    rate = None
    if earlier.run_id is not None:
        try:
            rate = store.get(earlier.run_id).samples_per_sec
        except FlowrateError:
            rate = None  # the run was deleted since; the point stays recorded
    return PointReport(
        point.index, point.params, earlier.status, earlier.run_id, earlier.reason, rate, earlier=True
    )
