"""`flowrate analyze-input`: can the input pipeline keep up with the model, and with how many workers?

The prediction's model, for a pipeline that delivers P samples/s to a model that consumes C
samples/s (its rate when the next batch is always ready):

- with loader workers, reading runs concurrently with the steps, so a step waits only for what the
  pipeline cannot deliver in time: the pair runs at min(P, C), and the share of the step time
  spent waiting is max(0, 1 − P / C);
- with 0 workers, the step reads its own batch before it computes: the times add up, and the
  share is (1 / P) / (1 / P + 1 / C) = C / (P + C).

P is measured for each loader configuration through the whole pipeline — read, gather, crc32
checks, pinning and the copy to the device, synchronized per batch — with nothing else running,
in steady state (the batches a prefetch queue holds at the start are drawn off first). C comes
from a short synthetic run of the same configuration, from the cost model's estimate for a target
device (`--target`, as `flowrate compile` prices a step: would this host's pipeline keep that
device fed?), or is given. The recommendation is the
smallest configuration (fewest workers, then least prefetch) whose predicted share is under 5%.

What the model leaves out: loader and model competing for the same cores (on a CPU device the
share a real `flowrate run --data` measures can be higher), and the copy's overlap with compute.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from flowrate.config import RunConfig
from flowrate.data.loader import Loader, LoaderSettings, SamplesBatch
from flowrate.data.make import problem_label
from flowrate.data.records import DatasetIndex
from flowrate.measure.device import synchronizer
from flowrate.measure.inputs import INPUT_BOUND_WARN
from flowrate.problems.base import Problem

PREFETCH_DEPTHS = (2, 4)


@dataclass(frozen=True)
class PipelinePoint:
    """One loader configuration measured alone, and the input-bound share it predicts."""

    workers: int
    prefetch: int | None  # None with 0 workers: batches are read on demand
    samples_per_sec: float
    batches: int
    seconds: float
    predicted_share: float


@dataclass(frozen=True)
class InputAnalysis:
    dataset: str
    samples: int
    shards: int
    batch_size: int
    device: str
    consumption_samples_per_sec: float
    consumption_source: str  # how C was found: "measured …" or "given"
    target_share: float
    points: list[PipelinePoint]
    recommended: PipelinePoint | None  # None: no configuration measured keeps up
    best: PipelinePoint  # the fastest pipeline measured

    @property
    def shortfall(self) -> float | None:
        """C / P of the fastest pipeline when none keeps the share under target (how many times short)."""
        if self.recommended is not None or self.best.samples_per_sec <= 0:
            return None
        return self.consumption_samples_per_sec / self.best.samples_per_sec

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "shortfall": self.shortfall}


def predicted_share(
    pipeline_samples_per_sec: float, consumption_samples_per_sec: float, workers: int
) -> float:
    """The input-bound share a pipeline of rate P gives a model consuming C: max(0, 1 − P / C) when
    workers read concurrently, C / (P + C) when the step reads its own batch (0 workers)."""
    p, c = pipeline_samples_per_sec, consumption_samples_per_sec
    if c <= 0:
        return 0.0
    if p <= 0:
        return 1.0
    return c / (p + c) if workers == 0 else max(0.0, 1.0 - p / c)


def worker_counts(max_workers: int) -> list[int]:
    """0, 1, 2, 4, 8, … up to ``max_workers``, which is always included."""
    counts = [0]
    count = 1
    while count < max_workers:
        counts.append(count)
        count *= 2
    if max_workers > 0:
        counts.append(max_workers)
    return counts


def default_max_workers(shards: int, world_size: int) -> int:
    """Bounded by the cores (less one for the main process when there are several) and by the shards."""
    cores = os.cpu_count() or 1
    return max(0, min(cores - 1 if cores > 2 else cores, shards // max(world_size, 1)))


def candidates(max_workers: int, prefetches: Sequence[int] = PREFETCH_DEPTHS) -> list[tuple[int, int | None]]:
    """The configurations to measure, smallest first: (workers, prefetch)."""
    return [(0, None)] + [(w, p) for w in worker_counts(max_workers)[1:] for p in prefetches]


def measure_pipeline(
    directory: str | Path,
    settings: LoaderSettings,
    device: torch.device,
    *,
    seconds: float = 1.0,
    min_batches: int = 8,
    index: DatasetIndex | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, int, float]:
    """(samples/s, batches, seconds) of the loader alone, copying each batch to ``device``."""
    loader = Loader(directory, settings, index=index, rank=0, world_size=1)
    sync = synchronizer(device)
    try:
        batches = iter(loader)
        # Draw off what the prefetch queues hold at the start (and let the workers start).
        for _ in range(2 * max(settings.workers, 1) * settings.prefetch + 1):
            _deliver(batches, device, sync)
        start = clock()
        count = samples = 0
        while count < min_batches or clock() - start < seconds:
            samples += _deliver(batches, device, sync)
            count += 1
        elapsed = clock() - start
    finally:
        loader.close()
    return samples / elapsed, count, elapsed


def _deliver(batches: Iterator[SamplesBatch], device: torch.device, sync: Callable[[], None]) -> int:
    batch = next(batches)
    if device.type != "cpu":
        batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        sync()
    return len(next(iter(batch.values())))


def analyze_input(
    directory: str | Path,
    index: DatasetIndex,
    settings: LoaderSettings,
    device: torch.device,
    consumption_samples_per_sec: float,
    consumption_source: str,
    *,
    configurations: Sequence[tuple[int, int | None]],
    seconds: float = 1.0,
    target_share: float = INPUT_BOUND_WARN,
    on_point: Callable[[PipelinePoint], None] | None = None,
) -> InputAnalysis:
    """Measure each (workers, prefetch) configuration, predict its share, recommend the smallest that
    keeps the share under ``target_share``. ``settings`` gives everything else (batch size, shuffle)."""
    points = []
    for workers, prefetch in configurations:
        trial = replace(settings, workers=workers, prefetch=prefetch or settings.prefetch)
        rate, batches, elapsed = measure_pipeline(directory, trial, device, seconds=seconds, index=index)
        point = PipelinePoint(
            workers,
            prefetch,
            rate,
            batches,
            elapsed,
            predicted_share(rate, consumption_samples_per_sec, workers),
        )
        points.append(point)
        if on_point is not None:
            on_point(point)
    recommended = next((p for p in points if p.predicted_share < target_share), None)
    return InputAnalysis(
        dataset=str(Path(directory).resolve()),
        samples=index.samples,
        shards=len(index.shards),
        batch_size=settings.batch_size,
        device=str(device),
        consumption_samples_per_sec=consumption_samples_per_sec,
        consumption_source=consumption_source,
        target_share=target_share,
        points=points,
        recommended=recommended,
        best=max(points, key=lambda p: p.samples_per_sec),
    )


def consumption_rate(config: RunConfig, problem: Problem) -> tuple[float, str]:
    """The model's samples/s with its batches ready on the device (a synthetic run of ``config``),
    and how it was found."""
    from flowrate.harness.api import run_config  # the runner imports this package's feed

    synthetic = config.replace(
        data_dir=None,
        loader_workers=RunConfig.loader_workers,
        prefetch=RunConfig.prefetch,
        shuffle_buffer=RunConfig.shuffle_buffer,
    )
    result = run_config(synthetic, problem)
    s = result.summary
    device = result.environment.device_name
    how = (
        f"measured: {s.timed_steps} synthetic steps of {problem_label(problem)}, {synthetic.settled_mode} "
        f"{synthetic.precision.value}, batch {result.batch_size}, on {device}"
    )
    return s.samples_per_sec, how


def estimated_rate(config: RunConfig, problem: Problem, batch_size: int, target: str) -> tuple[float, str]:
    """The cost model's samples/s for ``config`` on ``target`` (a device of the peak table, as
    `flowrate compile --target` takes), and how it was found: is this host's pipeline enough there?"""
    from flowrate.estimate.cost import estimate_step
    from flowrate.estimate.devices import target_device
    from flowrate.estimate.report import trace_for

    device = target_device(target)
    step = estimate_step(trace_for(config, problem, batch_size, device), device, problem.tokens_per_sample)
    how = (
        f"estimated by the cost model for {device.name}: {problem_label(problem)}, {config.settled_mode} "
        f"{config.precision.value}, batch {batch_size}"
    )
    return step.samples_per_sec, how
