"""Rate and GlobalRate, as Cerebras' and torch_xla's RateTracker define them.

At sample point k, with ``local_k = samples_k / seconds_k`` (samples and seconds since the previous
sample point):

    Rate_1 = local_1
    Rate_k = (1 − α)·local_k + α·Rate_{k−1}        (α = smoothing, 0.4 by default)
    GlobalRate = samples since the clock started / seconds since the clock started

Every read is a sample point, so the smoothing interval is the logging interval.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class RateReading:
    """What one sample point yields."""

    samples: int  # samples since the previous sample point
    seconds: float  # seconds since the previous sample point
    local_samples_per_sec: float
    rate_samples_per_sec: float  # smoothed: Rate
    global_samples_per_sec: float  # GlobalRate
    elapsed_s: float  # since the clock started


class RateTracker:
    """Tracks Rate and GlobalRate from sample counts and a clock.

    ``clock`` returns seconds; tests pass a fake one. Call :meth:`start` when the device is idle
    after preheat, :meth:`add` as samples are processed, :meth:`read` at each sample point (after
    synchronizing the device).
    """

    def __init__(self, smoothing: float = 0.4, clock: Callable[[], float] = time.perf_counter):
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
        self.smoothing = smoothing
        self._clock = clock
        self._start: float | None = None
        self._last_time = 0.0
        self._pending = 0
        self._total = 0
        self._rate: float | None = None

    def start(self) -> float:
        now = self._clock()
        self._start = self._last_time = now
        self._pending = self._total = 0
        self._rate = None
        return now

    def add(self, samples: int) -> None:
        self._pending += samples

    def read(self) -> RateReading:
        if self._start is None:
            raise RuntimeError("RateTracker.read() before start()")
        now = self._clock()
        seconds = now - self._last_time
        samples = self._pending
        local = samples / seconds if seconds > 0 else float("inf")
        if self._rate is None:
            self._rate = local
        else:
            self._rate = (1.0 - self.smoothing) * local + self.smoothing * self._rate
        self._total += samples
        elapsed = now - self._start
        self._last_time = now
        self._pending = 0
        return RateReading(
            samples=samples,
            seconds=seconds,
            local_samples_per_sec=local,
            rate_samples_per_sec=self._rate,
            global_samples_per_sec=self._total / elapsed if elapsed > 0 else float("inf"),
            elapsed_s=elapsed,
        )

    @property
    def total_samples(self) -> int:
        return self._total
