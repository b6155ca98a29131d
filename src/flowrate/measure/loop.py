"""The timed loop: preheat, then measure, synchronizing only at sample points.

Kept small and apart from the harness (flowrate/runner.py) so the code that runs while the
clock is running can be read in one sitting. Batches are made before the clock starts.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Interval:
    """One stretch between sample points."""

    index: int
    first_step: int  # index of its first timed step
    steps: int
    reading: RateReading


@dataclass(frozen=True)
class LoopRecord:
    intervals: list[Interval]
    losses: list[float]  # one per timed step, in order
    preheat_s: float
    preheat_step_s: float | None  # median synchronized step time in preheat (first step excluded)
    sample_every: int


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
) -> LoopRecord:
    """Preheat, start the clock with the device idle, and step until the plan is met."""
    preheat_s, step_s = preheat(step, batches, plan.preheat_steps, sync, clock)
    every = choose_sample_every(plan, step_s)
    tracker = RateTracker(plan.smoothing, clock)
    intervals: list[Interval] = []
    losses: list[float] = []
    n_batches = len(batches)
    done = 0
    sync()
    tracker.start()
    while True:
        count = every if plan.steps is None else min(every, plan.steps - done)
        pending = [step(batches[i % n_batches]) for i in range(done, done + count)]
        sync()
        tracker.add(count * batch_size)
        reading = tracker.read()
        values = torch.stack(pending).float().tolist()
        _check_finite(values, first_step=done)
        losses.extend(values)
        interval = Interval(index=len(intervals), first_step=done, steps=count, reading=reading)
        intervals.append(interval)
        done += count
        if on_interval is not None:
            on_interval(interval)
        if plan.steps is not None:
            if done >= plan.steps:
                break
        elif done >= plan.min_steps and reading.elapsed_s >= plan.duration_s:
            break
    return LoopRecord(intervals, losses, preheat_s, step_s, every)


def _check_finite(values: list[float], first_step: int, preheat: bool = False) -> None:
    for offset, value in enumerate(values):
        if not math.isfinite(value):
            raise NonFiniteLoss(first_step + offset, value, preheat=preheat)
