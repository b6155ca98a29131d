"""The loader: a sharded dataset as batches, split across DataLoader workers and distributed ranks.

Assignment, for epoch e with seed s (shuffle on):

1. the shards are permuted by a generator seeded with (s, e); with shuffle off they keep their order;
2. rank r of W ranks takes every W-th shard of that order from position r: ``order[r::W]``;
3. worker w of a rank's N workers takes every N-th of the rank's shards from w: ``rank_shards[w::N]``;
4. a worker reads its shards in that order, record after record, and permutes the stream in
   consecutive windows of ``shuffle_buffer`` records (a generator seeded with (s, e, r, w)).

Every shard goes to exactly one worker of one rank, so each sample is read exactly once per epoch
across all workers and ranks. Nothing is dropped or repeated to even them out: with K shards and R
ranks, a rank reads ⌊K/R⌋ or ⌈K/R⌉ whole shards (and the writer makes shards differ by at most one
record), so ranks and workers may get unequal numbers of samples, about one shard's worth apart
(torch's DistributedSampler pads with repeated samples instead). Every worker needs at least one
shard: shards >= ranks x workers, or the loader refuses.

The shuffle is a block shuffle over record indices: reads stay within a window (good locality on
disk), no record leaves its window, and it costs no memory for data. Within a batch, records are
read in file order (the batch is a set; the order of batches is what the shuffle randomizes).

A batch is a dict of (B, *shape) tensors in the stored dtypes; the problem turns it into its Batch
on the device (Problem.batch_from_samples). An endless loader (epochs=None) batches across epoch
ends, so every batch is full; a finite one ends each worker's stream with a short batch unless
drop_last. Each record's crc32 is checked the first time a process reads it (a long run pays for
the checks once per worker, not once per epoch).
"""

from __future__ import annotations

import itertools
import math
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from flowrate.data.records import (
    DatasetError,
    DatasetIndex,
    Shard,
    check_record,
    check_shard_files,
    read_index,
)
from flowrate.errors import ConfigError

TORCH_DTYPES = {
    "uint8": torch.uint8,
    "uint16": torch.uint16,
    "uint32": torch.uint32,
    "int32": torch.int32,
    "int64": torch.int64,
    "float16": torch.float16,
    "float32": torch.float32,
}
SamplesBatch = dict[str, torch.Tensor]


@dataclass(frozen=True)
class LoaderSettings:
    """How the loader reads: batch size, parallelism, shuffling, pinning."""

    batch_size: int
    # DataLoader worker processes; 0 reads in the calling thread, on demand.
    workers: int = 2
    # Batches each worker keeps ready (DataLoader's prefetch_factor); no effect with 0 workers.
    prefetch: int = 2
    shuffle: bool = True
    # Records per shuffle window (indices only: no data is held for it).
    shuffle_buffer: int = 4096
    seed: int = 0
    # Batches in page-locked memory, for fast non-blocking copies to a CUDA device.
    pin_memory: bool = False
    # Finite loaders only: drop each worker's short last batch.
    drop_last: bool = False
    # Check each record's crc32 the first time this process reads it.
    verify: bool = True
    # Seconds of artificial work per sample (a sleep in the reader): a known-cost pipeline for tests
    # and what-if questions. 0 in real use.
    sample_cost_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("batch_size", "prefetch", "shuffle_buffer"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(name, f"must be a positive integer, got {value!r}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 0:
            raise ConfigError("loader_workers", f"must be 0 or more, got {self.workers!r}")


def distributed_rank() -> tuple[int, int]:
    """(rank, world size) from torch.distributed when it is initialized, else (0, 1)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def epoch_order(shards: int, epoch: int, seed: int, shuffle: bool) -> np.ndarray:
    """The order of the shards in ``epoch``: a seeded permutation, or 0..shards-1 without shuffle."""
    if not shuffle:
        return np.arange(shards)
    return np.random.default_rng([seed, epoch]).permutation(shards)


def worker_shards(
    shards: int, epoch: int, seed: int, shuffle: bool, rank: int, world: int, worker: int, workers: int
) -> np.ndarray:
    """The shards worker ``worker`` of rank ``rank`` reads in ``epoch``, in reading order."""
    return epoch_order(shards, epoch, seed, shuffle)[rank::world][worker::workers]


def check_assignment(shards: int, world: int, workers: int, directory: str | Path) -> None:
    """Every worker of every rank must get at least one shard; else say how to fix it."""
    readers = world * max(workers, 1)
    if shards >= readers:
        return
    ranks = f"{world} ranks x " if world > 1 else ""
    fewer = max(1, shards // world)
    raise ConfigError(
        "loader_workers",
        f"{directory} has {shards} shard(s), but {ranks}{max(workers, 1)} loader worker(s) need at least "
        f"{readers} (each worker reads whole shards); use --loader-workers {fewer} or re-make the dataset "
        f"with --shards {readers} or more",
    )


@dataclass(frozen=True)
class LoaderFailure:
    """A worker's one-line error, passed as a batch so the main process can raise it without the
    worker's traceback."""

    error: DatasetError


class ShardStream(IterableDataset[SamplesBatch | LoaderFailure]):
    """The batches of one rank, split across the DataLoader workers reading them (see the module)."""

    def __init__(
        self,
        directory: Path,
        index: DatasetIndex,
        settings: LoaderSettings,
        rank: int,
        world: int,
        epochs: int | None,
        first_epoch: int,
    ) -> None:
        self.directory = directory
        self.index = index
        self.settings = settings
        self.rank = rank
        self.world = world
        self.epochs = epochs
        self.first_epoch = first_epoch
        self.offsets = index.offsets()
        self._shards: dict[int, Shard] = {}
        self._verified: dict[int, np.ndarray] = {}  # per shard: records whose crc32 this process checked

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_shards"] = {}  # memmaps are reopened in each worker, never pickled with their data
        state["_verified"] = {}
        return state

    def __iter__(self) -> Iterator[SamplesBatch | LoaderFailure]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        try:
            yield from self.batches(worker, workers)
        except DatasetError as error:
            if info is None:
                raise
            yield LoaderFailure(error)

    def record_ids(self, epoch: int, worker: int, workers: int) -> np.ndarray:
        """Global indices of the records this worker reads in ``epoch``, in stream order."""
        s = self.settings
        shards = worker_shards(
            len(self.index.shards), epoch, s.seed, s.shuffle, self.rank, self.world, worker, workers
        )
        if len(shards) == 0:
            return np.empty(0, dtype=np.int64)
        ids = np.concatenate([np.arange(self.offsets[i], self.offsets[i + 1]) for i in shards])
        if s.shuffle:
            rng = np.random.default_rng([s.seed, epoch, self.rank, worker])
            for start in range(0, len(ids), s.shuffle_buffer):
                window = ids[start : start + s.shuffle_buffer]
                window[:] = rng.permutation(window)
        return ids

    def batches(self, worker: int, workers: int) -> Iterator[SamplesBatch]:
        size = self.settings.batch_size
        epochs = (
            itertools.count(self.first_epoch)
            if self.epochs is None
            else range(self.first_epoch, self.first_epoch + self.epochs)
        )
        carry = np.empty(0, dtype=np.int64)
        for epoch in epochs:
            ids = self.record_ids(epoch, worker, workers)
            if len(ids) == 0:
                return
            ids = np.concatenate([carry, ids]) if len(carry) else ids
            full = len(ids) // size * size
            for start in range(0, full, size):
                yield self.read(ids[start : start + size])
            carry = ids[full:]
        if len(carry) and not self.settings.drop_last:
            yield self.read(carry)

    def read(self, ids: np.ndarray) -> SamplesBatch:
        """The records ``ids`` (global indices) as one batch, in file order; crc32s checked."""
        ids = np.sort(ids)
        owner = np.searchsorted(self.offsets, ids, side="right") - 1
        local = ids - self.offsets[owner]
        count = len(ids)
        batch = {
            f.name: _empty((count, *f.shape), TORCH_DTYPES[f.dtype], self.settings.pin_memory)
            for f in self.index.fields
        }
        outputs = [batch[f.name].numpy() for f in self.index.fields]
        starts = [0, *(np.flatnonzero(np.diff(owner)) + 1).tolist(), count]
        for a, b in itertools.pairwise(starts):
            shard = self._open(int(owner[a]))
            rows = local[a:b]
            for f, out in zip(self.index.fields, outputs, strict=True):
                np.take(shard.columns[f.name], rows, axis=0, out=out[a:b], mode="clip")
            if self.settings.verify:
                checked = self._verified[int(owner[a])]
                for i in a + np.flatnonzero(~checked[rows]):
                    check_record(shard, int(local[i]), [out[i] for out in outputs], int(ids[i]))
                checked[rows] = True
        if self.settings.sample_cost_s:
            time.sleep(self.settings.sample_cost_s * count)
        return batch

    def _open(self, shard: int) -> Shard:
        opened = self._shards.get(shard)
        if opened is None:
            opened = Shard.open(self.directory, self.index.shards[shard], self.index.fields)
            self._shards[shard] = opened
            self._verified[shard] = np.zeros(len(opened.crcs), dtype=bool)
        return opened


def _empty(shape: tuple[int, ...], dtype: torch.dtype, pin: bool) -> torch.Tensor:
    """An uninitialised batch tensor where it will end up: in shared memory in a worker (so sending
    it to the main process copies nothing), page-locked in the main process when pinning."""
    if get_worker_info() is not None:
        nbytes = math.prod(shape) * dtype.itemsize
        storage = torch.UntypedStorage._new_shared(nbytes)  # what default_collate does in a worker
        strides = [math.prod(shape[i + 1 :]) for i in range(len(shape))]
        return torch.empty(0, dtype=dtype).set_(storage, 0, shape, strides)
    return torch.empty(shape, dtype=dtype, pin_memory=pin)


def hand_over_quietly(worker_id: int) -> None:
    """A loader worker's first act: a batch its main process stopped fetching is not worth a
    traceback.

    A worker hands each batch's shared memory to the main process as a file descriptor, which the
    main process fetches from the worker's multiprocessing.resource_sharer thread; that thread
    reports a failed hand-over with sys.excepthook unless the worker is already exiting. A Ctrl-C
    or SIGTERM that ends the main process mid-fetch breaks the connection (an OSError or EOFError
    in the worker), whose traceback would stand beside the command's one line. In a worker nothing
    else reaches sys.excepthook (DataLoader sends the worker's own errors to the main process), so
    the hook drops those two kinds and passes any other on."""
    passed_on = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, traceback: TracebackType | None) -> None:
        if not issubclass(kind, (OSError, EOFError)):
            passed_on(kind, value, traceback)

    sys.excepthook = hook


class Loader:
    """Batches of the dataset in ``directory`` for this rank: iterate it for dicts of tensors.

    ``epochs=None`` streams without end (a run); otherwise it ends after ``epochs`` epochs starting
    at ``first_epoch``. ``rank`` and ``world_size`` default to torch.distributed's.
    """

    def __init__(
        self,
        directory: str | Path,
        settings: LoaderSettings,
        *,
        epochs: int | None = None,
        first_epoch: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        index: DatasetIndex | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.index = index if index is not None else read_index(self.directory)
        check_shard_files(self.directory, self.index)
        if rank is None or world_size is None:
            rank, world_size = distributed_rank()
        if not 0 <= rank < world_size:
            raise ConfigError("rank", f"must be in [0, {world_size}), got {rank}")
        check_assignment(len(self.index.shards), world_size, settings.workers, self.directory)
        self.settings = settings
        self.rank, self.world_size = rank, world_size
        # Workers pin nothing themselves: DataLoader's pinning thread copies their batches.
        stream_settings = replace(settings, pin_memory=settings.pin_memory and settings.workers == 0)
        self.stream = ShardStream(
            self.directory, self.index, stream_settings, rank, world_size, epochs, first_epoch
        )
        self._iterator: Iterator[Any] | None = None

    def __iter__(self) -> Iterator[SamplesBatch]:
        s = self.settings
        loader = DataLoader(
            self.stream,
            batch_size=None,
            num_workers=s.workers,
            prefetch_factor=s.prefetch if s.workers else None,
            pin_memory=s.pin_memory and s.workers > 0,
            worker_init_fn=hand_over_quietly,
        )
        with warnings.catch_warnings():  # the input report says so when workers outnumber cores
            warnings.filterwarnings("ignore", message="This DataLoader will create", category=UserWarning)
            self._iterator = iter(loader)
        for batch in self._iterator:
            if isinstance(batch, LoaderFailure):
                self.close()
                raise batch.error
            yield batch

    def close(self) -> None:
        """Stop the worker processes now (they also stop when the loader is garbage-collected)."""
        shutdown = getattr(self._iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
        self._iterator = None
