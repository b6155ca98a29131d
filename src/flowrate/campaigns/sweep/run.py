"""Running a sweep: each point in a fresh process, recorded in the store as soon as it ends.

Points run in batches through an Executor (flowrate.campaigns.process.executor): one at a time here, up to
max_parallel at once as cluster jobs. An out-of-memory found in one batch skips the larger
batches of its branch in the batches after it.

Why the skipping: within a branch (every key but batch_size equal) batch sizes run ascending
(flowrate.campaigns.sweep.spec), so when one runs out of memory every larger batch of that
branch is known not to fit and is recorded skipped instead of spending minutes failing. An
out-of-memory point is an expected outcome of a sweep, not an error.

Why it resumes: a sweep's identity is a hash of its base, grid and given name, and each point
is recorded (with its run, in one transaction) as soon as it ends, so the same sweep started
again runs only the points not yet recorded. A name the store holds for another grid is refused
(flowrate.campaigns.sweep.name): the two sweeps would merge under it.

Printing belongs to the CLI (flowrate/cli/sweep.py); this module reports through a listener.
"""

from __future__ import annotations

import dataclasses
import time
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from flowrate.campaigns.process.child import CRASHED, OOM, ChildOutcome
from flowrate.campaigns.process.executor import Executor, LocalExecutor, PointRunner
from flowrate.campaigns.process.job import Job
from flowrate.campaigns.sweep.name import check_name
from flowrate.campaigns.sweep.spec import PlannedPoint, SweepSpec, plan_points
from flowrate.errors import FlowrateError

if typing.TYPE_CHECKING:
    from flowrate.results.schema import Result
    from flowrate.results.store import Store, SweepPoint

# A recorded failure whose reason starts so was out of memory (it skips larger batches).
OOM_REASON = "out of memory"


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
    wall_s: float | None = None  # parent's wall time of a point run in this session (batch share)
    # a generation point's figures (flowrate generate): decode tokens/s and median TTFT
    decode_tokens_per_sec: float | None = None
    ttft_s: float | None = None

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
    executor: Executor | None = None,
    listener: SweepListener | None = None,
    retry_failed: bool = False,
    argv: list[str] | None = None,
    clock: Callable[[], float] = time.monotonic,
    points: Sequence[PlannedPoint] | None = None,
) -> SweepOutcome:
    """Run every point of ``spec`` not yet recorded in ``store``, recording each as it ends.

    ``executor`` runs the points, in batches of its max_parallel (default: one at a time, each
    in a fresh process; ``runner`` instead runs each point, as tests do with a fake one).
    ``points``: the sweep's plan_points(spec), when the caller made it already. With
    ``retry_failed``, failed and skipped points are run again. An interrupt (Ctrl-C) stops
    the sweep between two records: nothing recorded is lost and the same call resumes it.
    A name the store holds for other options is a ConfigError("name"), before anything runs.
    """
    check_name(spec, store.sweeps())
    planned = plan_points(spec) if points is None else list(points)
    executor = executor or LocalExecutor(argv, runner)
    listener = listener or _Silent()
    resumed = not store.open_sweep(spec.sweep_id, spec.label, spec.to_dict())
    recorded = store.sweep_points(spec.sweep_id)
    if retry_failed:
        recorded = {k: p for k, p in recorded.items() if p.status == "done"}
    point_tags = [*tags, f"sweep:{spec.label}"]
    state = _SweepState(planned, recorded)
    listener.begin(SweepStart(spec.sweep_id, spec.label, len(planned), state.kept, resumed))
    position = 0
    while position < len(planned):
        batch: list[PlannedPoint] = []
        while position < len(planned) and len(batch) < max(1, executor.max_parallel):
            point = planned[position]
            position += 1
            earlier = recorded.get(point.key)
            if earlier is not None:
                state.reports.append(_earlier_report(point, earlier, store))
                continue
            blocker = _blocked_by(point, state.oom_at)
            if blocker is None:
                batch.append(point)
                continue
            reason = f"batch {point.batch} skipped: batch {blocker} ran out of memory on this branch"
            store.record_point(spec.sweep_id, point.params, "skipped", reason=reason)
            state.reports.append(PointReport(point.index, point.params, "skipped", None, reason, wall_s=0.0))
            listener.recorded(state.reports[-1], state.progress(position))
        if batch:
            _run_batch(spec, store, executor, batch, point_tags, state, listener, clock, position)
    state.reports.sort(key=lambda r: r.index)
    return SweepOutcome(spec.sweep_id, spec.label, state.reports)


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped the sweep between two records; ``recorded``: the points its store now holds."""

    def __init__(self, recorded: int) -> None:
        super().__init__(recorded)
        self.recorded = recorded


def sweep_in_store(
    spec: SweepSpec,
    store: str | None,
    open_executor: Callable[[str], Executor],
    *,
    points: Sequence[PlannedPoint] | None = None,
    tags: Sequence[str] = (),
    retry_failed: bool = False,
    listener: SweepListener | None = None,
) -> SweepOutcome:
    """Run (or resume) the sweep in the results store at ``store`` (created if missing), its points
    through the executor ``open_executor`` gives for the sweep's id; an interrupt is raised as
    SweepInterrupted, saying how many points the store holds."""
    from flowrate.results.store import Store

    with Store(store) as opened:
        try:
            return run_sweep(
                spec,
                opened,
                tags=tags,
                listener=listener,
                retry_failed=retry_failed,
                executor=open_executor(spec.sweep_id),
                points=points,
            )
        except KeyboardInterrupt:
            raise SweepInterrupted(len(opened.sweep_points(spec.sweep_id))) from None


def _run_batch(
    spec: SweepSpec,
    store: Store,
    executor: Executor,
    batch: list[PlannedPoint],
    tags: Sequence[str],
    state: _SweepState,
    listener: SweepListener,
    clock: Callable[[], float],
    position: int,
) -> None:
    """Run one batch through the executor and record its points; an OOM blocks later batches."""
    for point in batch:
        listener.starting(point, state.progress(batch[0].index - 1))  # the batch still to run
    began = clock()
    outcomes = executor.run_many([Job(point.config) for point in batch])
    share = (clock() - began) / len(batch)  # the batch's wall time, shared by its points
    for point, child in zip(batch, outcomes, strict=True):
        state.walls.append(share)
        report = _record(spec, store, point, child, tags, share)
        if report.out_of_memory:
            _remember_oom(state.oom_at, point)
        state.reports.append(report)
        listener.recorded(report, state.progress(position))


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
        report = PointReport(point.index, point.params, "done", child.result.run_id, None, wall_s=wall)
        return _with_figures(report, child.result)
    message = child.message or "it failed without a message"
    if child.failure == OOM:
        reason = message if message.startswith(OOM_REASON) else f"{OOM_REASON}: {message}"
    elif child.failure == CRASHED:
        reason = f"crashed: {message}"
    else:
        reason = message
    store.record_point(spec.sweep_id, point.params, "failed", reason=reason)
    return PointReport(point.index, point.params, "failed", None, reason, wall_s=wall)


def _with_figures(report: PointReport, result: Result) -> PointReport:
    """What a point's row shows: samples/s, and for a generation its decode rate and median TTFT."""
    generation = result.generation
    ttft = generation.ttft_s if generation is not None else None
    return dataclasses.replace(
        report,
        samples_per_sec=result.summary.samples_per_sec,
        decode_tokens_per_sec=generation.decode_tokens_per_sec if generation is not None else None,
        ttft_s=ttft.median if ttft is not None else None,
    )


def _earlier_report(point: PlannedPoint, earlier: SweepPoint, store: Store) -> PointReport:
    report = PointReport(
        point.index, point.params, earlier.status, earlier.run_id, earlier.reason, earlier=True
    )
    if earlier.run_id is None:
        return report
    try:
        return _with_figures(report, store.get(earlier.run_id).result)
    except FlowrateError:
        return report  # the run was deleted since; the point stays recorded
