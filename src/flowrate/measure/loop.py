"""The timed loop: preheat, then measure, synchronizing only at sample points.

Kept small and apart from the harness (flowrate/runner.py) so the code that runs while the
clock is running can be read in one sitting. Batches are made before the clock starts.
"""

from __future__ import annotations

import abc
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, overload

import torch

from flowrate.errors import NonFiniteLoss
from flowrate.measure.rate import RateReading, RateTracker
from flowrate.problems.base import Batch

StepFn = Callable[[Batch], torch.Tensor]


@dataclass(frozen=True)
class LoopPlan:
    """How long to measure. ``steps`` fixes the count; otherwise min_steps and duration_s both hold."""

    preheat_steps: int
    steps: int | None
    min_steps: int
    duration_s: float
    sample_every: int | None  # None: chosen from the preheat's step time
    target_interval_s: float
    smoothing: float
    # Save a checkpoint after every this many timed steps (None: never). Sample points fall on
    # checkpoint boundaries so checkpoint time is an interval of its own.
    checkpoint_every: int | None = None


COMPUTE = "compute"
CHECKPOINT = "checkpoint"


@dataclass(frozen=True)
class Interval:
    """One stretch between sample points: steps computed, or a checkpoint written (0 samples)."""

    index: int
    first_step: int  # index of its first timed step (for a checkpoint: the step after it)
    steps: int
    reading: RateReading
    kind: str = COMPUTE
    # The first compute interval after a checkpoint, where asynchronous execution can make Rate spike.
    after_checkpoint: bool = False
    loss: float | None = None  # mean loss of the interval's steps


@dataclass(frozen=True)
class LoopRecord:
    intervals: list[Interval]
    losses: list[float]  # one per timed step, in order
    preheat_s: float
    preheat_step_s: float | None  # median synchronized step time in preheat (first step excluded)
    sample_every: int


class BatchStream(Sequence[Batch], abc.ABC):
    """An endless batch sequence whose item i is made when step i asks for it.

    The loop indexes ``batches[i % len(batches)]``; a stream is "long" enough never to wrap, and
    each index draws the next batch (a learnable task's, or the data loader's).
    """

    def __len__(self) -> int:
        return 2**62

    @overload
    def __getitem__(self, index: int) -> Batch: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Batch]: ...
    def __getitem__(self, index: int | slice) -> Batch | Sequence[Batch]:
        if isinstance(index, slice):
            raise TypeError(f"a {type(self).__name__} cannot be sliced")
        return self.next_batch()

    @abc.abstractmethod
    def next_batch(self) -> Batch:
        """The next step's batch, on the device."""


class Consensus(Protocol):
    """How the ranks of a data-parallel run agree on the loop's two local decisions.

    Each rank chooses its sample interval from its own preheat and sees its own clock; ranks must
    place sample points at the same steps (so per-interval sums over ranks mean something) and
    stop at the same step (a rank that stops early leaves the others waiting in a collective).
    """

    def sample_every(self, mine: int) -> int:
        """The steps between sample points every rank uses, given this rank's choice."""
        ...

    def finished(self, mine: bool) -> bool:
        """Whether every rank has measured long enough, given whether this one has."""
        ...


def preheat(
    step: StepFn,
    batches: Sequence[Batch],
    count: int,
    sync: Callable[[], None],
    clock: Callable[[], float],
) -> tuple[float, float | None]:
    """Run untimed steps; return their total time and the median step time after the first.

    Each preheat step is synchronized so its time is real; the first absorbs lazy initialisation
    and autotuning and is left out of the median.
    """
    start = clock()
    times = []
    for i in range(count):
        t0 = clock()
        loss = step(batches[i % len(batches)])
        sync()
        _check_finite([float(loss)], first_step=i, preheat=True)
        times.append(clock() - t0)
    total = clock() - start
    return total, (statistics.median(times[1:]) if len(times) > 1 else None)


def choose_sample_every(plan: LoopPlan, step_s: float | None) -> int:
    if plan.sample_every is not None:
        n = plan.sample_every
    elif step_s is None or step_s <= 0:
        n = 1
    else:
        n = max(1, math.ceil(plan.target_interval_s / step_s))
    return min(n, plan.steps) if plan.steps is not None else n


def timed_loop(
    step: StepFn,
    batches: Sequence[Batch],
    batch_size: int,
    sync: Callable[[], None],
    plan: LoopPlan,
    clock: Callable[[], float] = time.perf_counter,
    on_interval: Callable[[Interval], None] | None = None,
    on_start: Callable[[], None] | None = None,
    checkpoint: Callable[[int], None] | None = None,
    consensus: Consensus | None = None,
) -> LoopRecord:
    """Preheat, start the clock with the device idle, and step until the plan is met.

    ``on_start`` runs right after the clock starts (energy meters read their counters there);
    ``checkpoint(steps_done)`` saves state every ``plan.checkpoint_every`` steps, timed as an
    interval of its own. ``consensus`` makes the ranks of a data-parallel run agree on the
    sample interval and, when the plan is a duration, on when to stop (one tiny collective per
    sample point, after the clock is read: it falls in the next interval).
    """
    if plan.checkpoint_every is not None and checkpoint is None:
        raise ValueError("plan.checkpoint_every is set but no checkpoint function was given")
    preheat_s, step_s = preheat(step, batches, plan.preheat_steps, sync, clock)
    every = choose_sample_every(plan, step_s)
    if consensus is not None:
        every = consensus.sample_every(every)
    tracker = RateTracker(plan.smoothing, clock)
    intervals: list[Interval] = []
    losses: list[float] = []
    n_batches = len(batches)
    done = 0
    after_checkpoint = False
    sync()
    tracker.start()
    if on_start is not None:
        on_start()
    while True:
        count = _steps_to_next_point(plan, every, done)
        pending = [step(batches[i % n_batches]) for i in range(done, done + count)]
        sync()
        tracker.add(count * batch_size)
        reading = tracker.read()
        values = torch.stack(pending).float().tolist()
        _check_finite(values, first_step=done)
        losses.extend(values)
        interval = Interval(
            index=len(intervals),
            first_step=done,
            steps=count,
            reading=reading,
            after_checkpoint=after_checkpoint,
            loss=statistics.fmean(values),
        )
        intervals.append(interval)
        done += count
        after_checkpoint = False
        if on_interval is not None:
            on_interval(interval)
        finished = _finished(plan, done, reading.elapsed_s)
        if consensus is not None and plan.steps is None:
            finished = consensus.finished(finished)
        if finished:
            break
        if checkpoint is not None and plan.checkpoint_every and done % plan.checkpoint_every == 0:
            checkpoint(done)
            sync()
            saved = Interval(
                index=len(intervals), first_step=done, steps=0, reading=tracker.read(), kind=CHECKPOINT
            )
            intervals.append(saved)
            after_checkpoint = True
            if on_interval is not None:
                on_interval(saved)
    return LoopRecord(intervals, losses, preheat_s, step_s, every)


def _steps_to_next_point(plan: LoopPlan, every: int, done: int) -> int:
    """Steps until the next sample point: ``every``, cut short by the plan's end or a checkpoint."""
    count = every if plan.steps is None else min(every, plan.steps - done)
    if plan.checkpoint_every:
        count = min(count, plan.checkpoint_every - done % plan.checkpoint_every)
    return count


def _finished(plan: LoopPlan, done: int, elapsed_s: float) -> bool:
    if plan.steps is not None:
        return done >= plan.steps
    return done >= plan.min_steps and elapsed_s >= plan.duration_s


def _check_finite(values: list[float], first_step: int, preheat: bool = False) -> None:
    for offset, value in enumerate(values):
        if not math.isfinite(value):
            raise NonFiniteLoss(first_step + offset, value, preheat=preheat)
