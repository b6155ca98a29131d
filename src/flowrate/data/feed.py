"""The run's side of ``--data``: batches from the loader, copied to the device, the wait timed.

Input-bound share (MEASUREMENT.md) = the time a step waits for its next batch plus the
host-to-device copy, over the step time. The wait is read on the host clock around the loader's
``next``; on CUDA the copy (non-blocking, from pinned memory, on the compute stream, so it holds
up the step that needs it) is timed with CUDA events read at the next sample point, so the loop
gains no synchronization. The conversion to the problem's Batch (dtype, normalisation, masking)
runs on the device after the copy and counts as compute. TensorFlow's profiler calls a share of
5% or more moderately, and 20% or more highly input-bound; flowrate warns at both.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from flowrate.config import RunConfig
from flowrate.data.loader import Loader, LoaderSettings, SamplesBatch
from flowrate.data.make import problem_label, problem_spec
from flowrate.data.records import DatasetIndex, check_fits, check_shard_files, read_index
from flowrate.errors import ConfigError
from flowrate.measure.loop import BatchStream
from flowrate.problems.base import Batch, Problem


def loader_settings(config: RunConfig, batch_size: int, device: torch.device) -> LoaderSettings:
    """The loader a run's configuration asks for; batches are pinned when the device is CUDA."""
    return LoaderSettings(
        batch_size=batch_size,
        workers=config.loader_workers,
        prefetch=config.prefetch,
        shuffle_buffer=config.shuffle_buffer,
        seed=config.seed,
        pin_memory=device.type == "cuda",
    )


def open_dataset(directory: str, problem: Problem) -> DatasetIndex:
    """The index of the dataset in ``directory``, once its shards are all there and its samples are
    what ``problem`` takes."""
    spec = problem_spec(problem, "data")
    index = read_index(directory)
    check_fits(index, spec, directory, problem_label(problem))
    check_shard_files(directory, index)
    return index


def open_loader(
    directory: str, problem: Problem, settings: LoaderSettings, *, epochs: int | None = None
) -> Loader:
    """A loader over ``directory`` after checking that its samples are what ``problem`` takes."""
    return Loader(directory, settings, index=open_dataset(directory, problem), epochs=epochs)


class DataFeed(BatchStream):
    """The run's batches from a dataset: item i is the loader's next batch, on the device, as the
    problem's Batch. The time spent waiting for it and copying it accumulates until take_wait()."""

    def __init__(
        self,
        loader: Loader,
        problem: Problem,
        device: torch.device,
        generator: torch.Generator,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.loader = loader
        self.problem = problem
        self.device = device
        self.generator = generator
        self.clock = clock
        self._batches: Iterator[SamplesBatch] = iter(loader)
        self._wait_s = 0.0
        self._copies: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []

    def next_batch(self) -> Batch:
        start = self.clock()
        host = next(self._batches)
        self._wait_s += self.clock() - start
        return self.problem.batch_from_samples(self._to_device(host), self.generator)

    def _to_device(self, host: SamplesBatch) -> SamplesBatch:
        if self.device.type == "cpu":
            return host
        if self.device.type != "cuda":  # another backend: a copy timed on the host clock
            start = self.clock()
            moved = {k: v.to(self.device) for k, v in host.items()}
            self._wait_s += self.clock() - start
            return moved
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        moved = {k: v.to(self.device, non_blocking=True) for k, v in host.items()}
        end.record()
        self._copies.append((begin, end))
        return moved

    def start(self) -> None:
        """Forget the waits so far: the clock starts now."""
        self._wait_s = 0.0
        self._copies.clear()

    def take_wait(self) -> float:
        """Seconds waited and copied since the last call (or start()); call after a device sync."""
        copies = sum(begin.elapsed_time(end) for begin, end in self._copies) / 1e3
        wait = self._wait_s + copies
        self.start()
        return wait

    def close(self) -> None:
        self.loader.close()

    def describe(self) -> dict[str, Any]:
        """The dataset and loader settings, for the result's input section."""
        loader = self.loader
        s = loader.settings
        return {
            "dataset": str(loader.directory.resolve()),
            "samples": loader.index.samples,
            "shards": len(loader.index.shards),
            "fields": [f.to_dict() for f in loader.index.fields],
            "origin": loader.index.origin.get("source"),
            "workers": s.workers,
            "prefetch": s.prefetch if s.workers else None,
            "pinned": s.pin_memory,
            "shuffle_buffer": s.shuffle_buffer,
            "rank": loader.rank,
            "world_size": loader.world_size,
        }


def open_feed(
    config: RunConfig, problem: Problem, batch_size: int, device: torch.device, generator: torch.Generator
) -> DataFeed:
    """The run's feed from ``config.data_dir``; a dataset that does not fit the problem is refused."""
    if config.data_dir is None:
        raise ConfigError("data", "no dataset given")
    loader = open_loader(config.data_dir, problem, loader_settings(config, batch_size, device))
    return DataFeed(loader, problem, device, generator)
