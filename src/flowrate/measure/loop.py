"""The timed loop: preheat, then measure, synchronizing only at sample points.

Kept small and apart from the harness (flowrate.harness) so the code that runs while the clock
is running can be read in one sitting. ``LoopClock`` is the measurement, written once and fed one
step at a time; ``timed_loop`` drives it with the harness's own steps (batches made before the
clock starts), and a Session (flowrate.harness.session) feeds it from the user's own loop.
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

from flowrate.config import RunConfig
from flowrate.errors import NonFiniteLoss
from flowrate.measure.rate import RateReading, RateTracker
from flowrate.problems.base import Batch

StepFn = Callable[[Batch], torch.Tensor]
# Asked at every sample point (the last included) with the record so far: True ends the loop there.
SampleObserver = Callable[["LoopRecord"], bool]


@dataclass(frozen=True)
class LoopPlan:
    """How long to measure: ``steps`` ends it at that count of timed steps; ``duration_s`` ends it
    once that many seconds and ``min_steps`` have passed; with neither, its driver ends it (a
    session's loop runs out of batches)."""

    preheat_steps: int
    steps: int | None
    min_steps: int
    duration_s: float | None
    sample_every: int | None  # None: chosen from the preheat's step time
    target_interval_s: float
    smoothing: float
    # Save a checkpoint after every this many timed steps (None: never). Sample points fall on
    # checkpoint boundaries so checkpoint time is an interval of its own.
    checkpoint_every: int | None = None

    @classmethod
    def from_config(cls, config: RunConfig) -> LoopPlan:
        """The plan a RunConfig describes: its step count, when it has one, overrides its duration."""
        return cls(
            preheat_steps=config.preheat_steps,
            steps=config.steps,
            min_steps=config.min_steps,
            duration_s=config.duration_s if config.steps is None else None,
            sample_every=config.sample_every,
            target_interval_s=config.target_interval_s,
            smoothing=config.smoothing,
            checkpoint_every=config.checkpoint_every,
        )


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


def choose_sample_every(plan: LoopPlan, step_s: float | None) -> int:
    if plan.sample_every is not None:
        n = plan.sample_every
    elif step_s is None or step_s <= 0:
        n = 1
    else:
        n = max(1, math.ceil(plan.target_interval_s / step_s))
    return min(n, plan.steps) if plan.steps is not None else n


class LoopClock:
    """The measurement of a loop, fed one step at a time; its driver runs the steps.

    - The first ``plan.preheat_steps`` steps are preheat: each is synchronized and timed (from the
      previous one's end, or from the clock's creation), and its loss checked. The first absorbs
      lazy initialisation and autotuning and is left out of the median step time.
    - After the last of them the clock starts (``start()``; a driver without preheat calls it):
      the sample interval is chosen from that median, and the device is idle when it starts.
    - Timed steps are only counted. At a sample point the device is synchronized, Rate and
      GlobalRate are read, the interval's losses checked, and the plan asked whether to stop
      (``done``). Every ``plan.checkpoint_every`` steps a checkpoint is saved, timed as an
      interval of its own.

    ``on_start`` runs right after the clock starts (energy meters read their counters there);
    ``on_interval`` gets every interval at its sample point; ``observer``, given the record so
    far at each sample point, may end the loop there, before the plan is met. ``consensus`` makes
    the ranks of a data-parallel run agree on the sample interval and, when the plan is a
    duration, on when to stop (one tiny collective per sample point, after the clock is read: it
    falls in the next interval).
    """

    def __init__(
        self,
        plan: LoopPlan,
        sync: Callable[[], None],
        clock: Callable[[], float] = time.perf_counter,
        *,
        on_interval: Callable[[Interval], None] | None = None,
        on_start: Callable[[], None] | None = None,
        checkpoint: Callable[[int], None] | None = None,
        consensus: Consensus | None = None,
        observer: SampleObserver | None = None,
    ) -> None:
        if consensus is not None and observer is not None:
            raise ValueError(
                "an observer that may stop the loop would stop one rank of a data-parallel run alone"
            )
        if plan.checkpoint_every is not None and checkpoint is None:
            raise ValueError("plan.checkpoint_every is set but no checkpoint function was given")
        self.plan = plan
        self._sync = sync
        self._clock = clock
        self._on_interval = on_interval
        self._on_start = on_start
        self._checkpoint = checkpoint
        self._consensus = consensus
        self._observer = observer
        self._tracker = RateTracker(plan.smoothing, clock)
        self.intervals: list[Interval] = []
        self.losses: list[float] = []  # one per timed step with a loss, in order
        self.every = 1
        self.started = False
        self.done = False
        self._preheat_times: list[float] = []
        self._mark = clock()
        self._step_s: float | None = None
        self._timed = 0  # timed steps up to the last sample point
        self._pending: list[torch.Tensor] = []  # the losses of the interval under way
        self._interval_steps = 0
        self._interval_end = 0  # steps of the interval under way at which its sample point falls
        self._after_checkpoint = False

    @property
    def steps(self) -> int:
        """Steps counted so far, preheat and timed."""
        return len(self._preheat_times) + self._timed + self._interval_steps

    def on_step(self, loss: torch.Tensor | None, samples: int) -> Interval | None:
        """Count one step the driver has queued: preheat until the clock has started, then timed.

        Returns the interval when the step ends at a sample point. ``loss`` may be None (an
        inference loop that computes none): the step is counted, and its interval has no loss.
        """
        if not self.started:
            self._preheat_step(loss)
            return None
        self._tracker.add(samples)
        if loss is not None:
            self._pending.append(loss)
        self._interval_steps += 1
        if self._interval_steps < self._interval_end:
            return None
        interval = self._sample_point()
        if not self.done:
            self._maybe_checkpoint()
        return interval

    def start(self) -> None:
        """Choose the sample interval, synchronize, and start the clock with the device idle."""
        times = self._preheat_times
        self._step_s = statistics.median(times[1:]) if len(times) > 1 else None
        every = choose_sample_every(self.plan, self._step_s)
        self.every = self._consensus.sample_every(every) if self._consensus is not None else every
        self._sync()
        self._tracker.start()
        if self._on_start is not None:
            self._on_start()
        self.started = True
        self._interval_end = self._steps_to_next_point()

    def flush(self) -> Interval | None:
        """The loop ended between sample points (a session's batches ran out): the steps since the
        last sample point make a last interval."""
        return self._sample_point() if self.started and self._interval_steps else None

    def record(self) -> LoopRecord:
        return LoopRecord(self.intervals, self.losses, sum(self._preheat_times), self._step_s, self.every)

    def _preheat_step(self, loss: torch.Tensor | None) -> None:
        self._sync()
        if loss is not None:
            _check_finite([float(loss)], first_step=len(self._preheat_times), preheat=True)
        now = self._clock()
        self._preheat_times.append(now - self._mark)
        self._mark = now
        if len(self._preheat_times) >= self.plan.preheat_steps:
            self.start()

    def _sample_point(self) -> Interval:
        self._sync()
        reading = self._tracker.read()
        values = torch.stack(self._pending).float().tolist() if self._pending else []
        _check_finite(values, first_step=self._timed)
        self.losses.extend(values)
        interval = Interval(
            index=len(self.intervals),
            first_step=self._timed,
            steps=self._interval_steps,
            reading=reading,
            after_checkpoint=self._after_checkpoint,
            loss=statistics.fmean(values) if values else None,
        )
        self.intervals.append(interval)
        self._timed += self._interval_steps
        self._pending, self._interval_steps, self._after_checkpoint = [], 0, False
        if self._on_interval is not None:
            self._on_interval(interval)
        self.done = self._finished(reading.elapsed_s)
        if self._observer is not None:  # asked at every sample point, the last included
            self.done = self._observer(self.record()) or self.done
        self._interval_end = self._steps_to_next_point()
        return interval

    def _maybe_checkpoint(self) -> None:
        every = self.plan.checkpoint_every
        if self._checkpoint is None or not every or self._timed % every:
            return
        self._checkpoint(self._timed)
        self._sync()
        reading = self._tracker.read()
        saved = Interval(
            index=len(self.intervals), first_step=self._timed, steps=0, reading=reading, kind=CHECKPOINT
        )
        self.intervals.append(saved)
        self._after_checkpoint = True
        if self._on_interval is not None:
            self._on_interval(saved)

    def _steps_to_next_point(self) -> int:
        """Steps until the next sample point: ``every``, cut short by the plan's end or a checkpoint."""
        plan, done = self.plan, self._timed
        count = self.every if plan.steps is None else min(self.every, plan.steps - done)
        if plan.checkpoint_every:
            count = min(count, plan.checkpoint_every - done % plan.checkpoint_every)
        return count

    def _finished(self, elapsed_s: float) -> bool:
        plan, done = self.plan, self._timed
        finished = (plan.steps is not None and done >= plan.steps) or (
            plan.duration_s is not None and done >= plan.min_steps and elapsed_s >= plan.duration_s
        )
        if self._consensus is not None and plan.steps is None and plan.duration_s is not None:
            finished = self._consensus.finished(finished)
        return finished


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
    observer: SampleObserver | None = None,
) -> LoopRecord:
    """Preheat, start the clock with the device idle, and step until the plan is met.

    Step i of the preheat, and then timed step i, runs on ``batches[i % len(batches)]``. The
    other arguments are LoopClock's: ``checkpoint(steps_done)`` saves state every
    ``plan.checkpoint_every`` steps.
    """
    if plan.steps is None and plan.duration_s is None:
        raise ValueError("a plan with neither steps nor duration_s never ends")
    loop = LoopClock(
        plan,
        sync,
        clock,
        on_interval=on_interval,
        on_start=on_start,
        checkpoint=checkpoint,
        consensus=consensus,
        observer=observer,
    )
    n_batches = len(batches)
    for i in range(plan.preheat_steps):
        loop.on_step(step(batches[i % n_batches]), batch_size)
    if not loop.started:  # no preheat
        loop.start()
    i = 0
    while not loop.done:
        loop.on_step(step(batches[i % n_batches]), batch_size)
        i += 1
    return loop.record()


def _check_finite(values: list[float], first_step: int, preheat: bool = False) -> None:
    for offset, value in enumerate(values):
        if not math.isfinite(value):
            raise NonFiniteLoss(first_step + offset, value, preheat=preheat)
