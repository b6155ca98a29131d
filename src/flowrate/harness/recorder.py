"""The interval recorder: each Interval of the timed loop becomes its IntervalRecord at its sample point.

A record carries the loop's figures (Rate, GlobalRate, loss) and what is read beside them there:
model FLOP/s and MFU, power, memory, and the input pipeline's wait. It is handed to listeners
(live progress, TensorBoard) as it is made, for `flowrate run` and a session alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch

from flowrate.measure.energy import EnergyMeter
from flowrate.measure.flops import interval_mfu
from flowrate.measure.loop import COMPUTE, Interval
from flowrate.measure.memory import current_bytes
from flowrate.results.schema import IntervalRecord


class InputWaits(Protocol):
    """The input pipeline's waits, as the recorder reads them: a DataFeed, or a session's loader."""

    def start(self) -> None: ...

    def take_wait(self) -> float: ...


class IntervalRecorder:
    """Turns each Interval into its IntervalRecord at the sample point and hands it on."""

    def __init__(
        self,
        flops_per_sample: int,
        peak_flops: float | None,
        device: torch.device,
        meter: EnergyMeter,
        listeners: list[Callable[[IntervalRecord], None]],
        feed: InputWaits | None = None,
    ) -> None:
        self.flops_per_sample = flops_per_sample
        self.peak_flops = peak_flops
        self.device = device
        self.meter = meter
        self.listeners = listeners
        self.feed = feed
        self.records: list[IntervalRecord] = []

    def start(self) -> None:
        """The clock has started: read the energy counter, forget the loader's waits so far."""
        self.meter.start()
        if self.feed is not None:
            self.feed.start()

    def __call__(self, interval: Interval) -> None:
        reading = interval.reading
        model_rate = reading.local_samples_per_sec * self.flops_per_sample
        allocated, rss = current_bytes(self.device)
        wait = self.feed.take_wait() if self.feed is not None and interval.kind == COMPUTE else None
        record = IntervalRecord(
            index=interval.index,
            kind=interval.kind,
            first_step=interval.first_step,
            steps=interval.steps,
            samples=reading.samples,
            seconds=reading.seconds,
            samples_per_sec=reading.local_samples_per_sec,
            rate_samples_per_sec=reading.rate_samples_per_sec,
            global_samples_per_sec=reading.global_samples_per_sec,
            elapsed_s=reading.elapsed_s,
            after_checkpoint=interval.after_checkpoint,
            loss=interval.loss,
            model_flops_per_sec=model_rate,
            mfu=interval_mfu(model_rate, self.peak_flops) if self.flops_per_sample else None,
            power_w=self.meter.power_watts(),
            device_memory_allocated_bytes=allocated,
            process_rss_bytes=rss,
            input_wait_s=wait,
            input_bound_share=wait / reading.seconds if wait is not None and reading.seconds > 0 else None,
        )
        self.records.append(record)
        for listener in self.listeners:
            listener(record)
