"""Writing a dataset: samples in order into near-equal shards, a crc32 per record, the index last.

Writers stream: samples arrive in chunks (a batch of synthetic data, a window of a token file, a
few decoded images), so a dataset larger than memory is written in one pass.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from flowrate.data.records import (
    INDEX,
    DatasetIndex,
    ShardInfo,
    record_crc,
    shard_layout,
)
from flowrate.errors import ConfigError
from flowrate.io import write_atomic
from flowrate.problems.sample import SampleField


def shard_sizes(samples: int, shards: int) -> list[int]:
    """Records per shard: ``samples`` split into ``shards`` parts differing by at most one."""
    return [samples * (i + 1) // shards - samples * i // shards for i in range(shards)]


def prepare_output(directory: str | Path, samples: int, shards: int) -> Path:
    """Check the request and the folder (new or empty) before any work; return the folder."""
    if samples < 1:
        raise ConfigError("samples", f"must be a positive integer, got {samples}")
    if shards < 1:
        raise ConfigError("shards", f"must be a positive integer, got {shards}")
    if shards > samples:
        raise ConfigError(
            "shards", f"{shards} shards of {samples} samples would leave some empty; use at most {samples}"
        )
    folder = Path(directory)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ConfigError(
            "out", f"{folder} exists and is not an empty folder; choose a new --out or remove it"
        )
    return folder


class DatasetWriter:
    """Write ``samples`` records of ``fields`` into ``shards`` files in ``directory``.

    Call write() with chunks of columns (a (n, *shape) array per field, in the field's dtype) until
    every sample is written, then close(), which writes the index. Leaving early (an exception)
    leaves no index, so the folder is never mistaken for a finished dataset.
    """

    def __init__(
        self,
        directory: str | Path,
        fields: Sequence[SampleField],
        samples: int,
        shards: int,
        origin: Mapping[str, Any],
    ) -> None:
        self.folder = prepare_output(directory, samples, shards)
        self._made_folder = not self.folder.exists()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.fields = tuple(fields)
        self.origin = dict(origin)
        self.sizes = shard_sizes(samples, shards)
        self.infos: list[ShardInfo] = []
        self._shard = -1
        self._filled = 0
        self._columns: dict[str, np.memmap[Any, Any]] = {}
        self._crcs: np.memmap[Any, Any] | None = None
        self._ranges: dict[str, list[int]] = {}
        self._index: DatasetIndex | None = None

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if kind is None:
            self.close()
        else:
            self.discard()

    def discard(self) -> None:
        """Remove what this writer wrote (the folder too, when it made it): no half dataset is left."""
        self._columns, self._crcs = {}, None
        for number in range(self._shard + 1):
            (self.folder / f"shard-{number:05d}.bin").unlink(missing_ok=True)
        if self._made_folder:
            with contextlib.suppress(OSError):
                self.folder.rmdir()

    @property
    def written(self) -> int:
        return sum(self.sizes[: max(self._shard, 0)]) + (self._filled if self._shard >= 0 else 0)

    def write(self, columns: Mapping[str, np.ndarray]) -> None:
        count = self._check(columns)
        start = 0
        while start < count:
            if self._shard < 0 or self._filled == self.sizes[self._shard]:
                self._next_shard()
            take = min(count - start, self.sizes[self._shard] - self._filled)
            rows = slice(self._filled, self._filled + take)
            chunk = {f.name: columns[f.name][start : start + take] for f in self.fields}
            for f in self.fields:
                self._columns[f.name][rows] = chunk[f.name]
                if f.is_integer and take:
                    lo, hi = int(chunk[f.name].min()), int(chunk[f.name].max())
                    old = self._ranges.get(f.name, [lo, hi])
                    self._ranges[f.name] = [min(old[0], lo), max(old[1], hi)]
            assert self._crcs is not None
            for i in range(take):
                self._crcs[self._filled + i] = record_crc([chunk[f.name][i] for f in self.fields])
            self._filled += take
            start += take

    def close(self) -> DatasetIndex:
        if self._index is not None:
            return self._index
        self._finish_shard()
        total = sum(self.sizes)
        if len(self.infos) != len(self.sizes) or sum(i.records for i in self.infos) != total:
            raise RuntimeError(f"only {self.written} of {total} samples were written")
        index = DatasetIndex(self.fields, tuple(self.infos), self.origin)
        write_atomic(self.folder / INDEX, json.dumps(index.to_dict(), indent=1) + "\n")
        self._index = index
        return index

    def finished(self) -> DatasetIndex:
        """The index written by close()."""
        if self._index is None:
            raise RuntimeError("the dataset is not finished: close() the writer first")
        return self._index

    def _check(self, columns: Mapping[str, np.ndarray]) -> int:
        counts = set()
        for f in self.fields:
            value = columns.get(f.name)
            if value is None:
                raise ValueError(f"no column {f.name!r} given to the writer")
            if value.shape[1:] != f.shape or value.dtype != f.numpy_dtype:
                raise ValueError(
                    f"column {f.name!r} is {value.shape[1:]} {value.dtype}; the dataset stores {f.describe()}"
                )
            counts.add(len(value))
        if len(counts) != 1:
            raise ValueError(f"columns of different lengths: {sorted(counts)}")
        count = counts.pop()
        if self.written + count > sum(self.sizes):
            raise ValueError(
                f"{self.written + count} samples written, more than the {sum(self.sizes)} declared"
            )
        return count

    def _next_shard(self) -> None:
        self._finish_shard()
        self._shard += 1
        self._filled = 0
        records = self.sizes[self._shard]
        path = self.folder / f"shard-{self._shard:05d}.bin"
        offsets, crc_offset, total = shard_layout(self.fields, records)
        with path.open("wb") as out:
            out.truncate(total)
        self._columns = {
            f.name: np.memmap(path, dtype=f.numpy_dtype, mode="r+", offset=offset, shape=(records, *f.shape))
            for f, offset in zip(self.fields, offsets, strict=True)
        }
        self._crcs = np.memmap(path, dtype="<u4", mode="r+", offset=crc_offset, shape=(records,))
        self._ranges = {}

    def _finish_shard(self) -> None:
        if self._crcs is None:
            return
        for column in self._columns.values():
            column.flush()
        self._crcs.flush()
        name = f"shard-{self._shard:05d}.bin"
        self.infos.append(ShardInfo(name, self._filled, self._ranges))
        self._columns, self._crcs = {}, None
