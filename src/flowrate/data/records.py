"""flowrate's on-disk dataset: fixed-size records in numpy-memmap shards, described by a JSON index.

Why this format, rather than WebDataset tars, Arrow/Parquet or Mosaic's MDS: every sample a
benchmark feeds has a fixed shape (a token window, a decoded image, a label), so a shard can be a
plain array file. numpy maps it into memory: a read is a slice of the page cache with no parsing,
no decoding and no new dependency, random access is O(1) (so shuffling costs nothing but
locality), and a batch is one gather per field. Each record carries a crc32, checked as it is read,
so a damaged shard is reported by file and record rather than as a wrong loss. What it gives up:
variable-size samples (store them decoded at a fixed size: images are resized at import) and
compression (decoded images take 3·H·W bytes; an ImageNet at 224² is about 190 GB).

A dataset is a folder:

    index.json          format and version, the fields (name, shape, dtype, value bound), the
                        shards (file, records, each integer field's min and max), and its origin
    shard-00000.bin …   columnar: for each field in order, `records` values of its shape and dtype,
                        each block starting on a 64-byte boundary; then one crc32 per record (over
                        the record's bytes field by field, little-endian uint32)

The index is written last, so a folder without one is an unfinished write.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from flowrate.errors import ConfigError, FlowrateError, RunFailed
from flowrate.problems.sample import SampleField

FORMAT = "flowrate-shards"
# History of the format (bump on any change a reader must know about):
#   1: columnar fixed-size records, a crc32 per record, per-field min/max per shard.
VERSION = 1
INDEX = "index.json"
ALIGN = 64


class DatasetError(FlowrateError):
    """A dataset on disk is missing, unfinished or damaged; the message names the file (and record)."""


class DamagedRecord(DatasetError, RunFailed):
    """A record that fails its crc32 check, met while reading: the run fails (exit 1), naming it."""


@dataclass(frozen=True)
class ShardInfo:
    file: str
    records: int
    # integer fields: [min, max] of the values in this shard
    ranges: dict[str, list[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class DatasetIndex:
    fields: tuple[SampleField, ...]
    shards: tuple[ShardInfo, ...]
    # who made it: {"source": "synthetic" | "tokens" | "images", "problem": …, "classes": …, …}
    origin: dict[str, Any] = field(default_factory=dict)

    @property
    def samples(self) -> int:
        return sum(s.records for s in self.shards)

    def offsets(self) -> np.ndarray:
        """(shards + 1,) int64: the global index of each shard's first record, then the total."""
        return np.concatenate([[0], np.cumsum([s.records for s in self.shards], dtype=np.int64)])

    def value_range(self, name: str) -> tuple[int, int] | None:
        """[min, max] of an integer field over every shard (None: no values or not recorded)."""
        spans = [s.ranges[name] for s in self.shards if name in s.ranges]
        return (min(lo for lo, _ in spans), max(hi for _, hi in spans)) if spans else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "samples": self.samples,
            "fields": [f.to_dict() for f in self.fields],
            "shards": [{"file": s.file, "records": s.records, "ranges": s.ranges} for s in self.shards],
            "origin": self.origin,
        }


def shard_layout(fields: Sequence[SampleField], records: int) -> tuple[list[int], int, int]:
    """Byte offsets of each field's block and of the crc block in a shard of ``records``, and its size."""
    offsets = []
    position = 0
    for f in fields:
        offsets.append(position)
        position = _aligned(position + f.record_bytes * records)
    return offsets, position, position + 4 * records


def _aligned(position: int) -> int:
    return -(-position // ALIGN) * ALIGN


def record_crc(values: Sequence[np.ndarray]) -> int:
    """crc32 of one record: its fields' bytes, in field order."""
    crc = 0
    for value in values:
        crc = zlib.crc32(value.data, crc)
    return crc


def read_index(directory: str | Path) -> DatasetIndex:
    """The index of the dataset in ``directory``; a missing, unfinished or foreign one is refused."""
    folder = Path(directory)
    path = folder / INDEX
    if not folder.is_dir():
        raise DatasetError(
            f"no dataset at {folder}: the folder does not exist; make one with `flowrate data make` "
            "or `flowrate data import-tokens` / `import-images`"
        )
    if not path.is_file():
        raise DatasetError(
            f"{folder} is not a flowrate dataset ({INDEX} is missing: an unfinished write, or another "
            "format); make one with `flowrate data make` or `flowrate data import-tokens` / `import-images`"
        )
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DatasetError(f"{path} is damaged ({error}); re-make the dataset") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise DatasetError(f"{path} is not a {FORMAT} index")
    version = data.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise DatasetError(
            f"{path} has format version {version!r}, newer than this flowrate reads ({VERSION})"
        )
    try:
        fields = tuple(SampleField.from_dict(f) for f in data["fields"])
        shards = tuple(
            ShardInfo(str(s["file"]), _record_count(s["records"]), dict(s.get("ranges", {})))
            for s in data["shards"]
        )
    except (KeyError, TypeError, ValueError) as error:
        raise DatasetError(
            f"{path} is damaged ({type(error).__name__}: {error}); re-make the dataset"
        ) from None
    for info in shards:
        if not _plain_name(info.file):
            raise DatasetError(
                f"{path} names shard {info.file!r}, which is not a file name inside the dataset's folder; "
                "a dataset reads only its own shards: re-make the dataset"
            )
    return DatasetIndex(fields, shards, dict(data.get("origin", {})))


def _record_count(value: object) -> int:
    """A shard's number of records as the index gives it: an integer >= 0 (int() would take "64",
    2.5 or -5, and blame the shard's size for what is wrong in the index)."""
    if type(value) is not int or value < 0:
        raise ValueError(f"a shard's records must be an integer >= 0, not {value!r}")
    return value


def _plain_name(name: str) -> bool:
    """A file name in the folder itself: no separator (either kind), not '.' or '..', no NUL."""
    if name in ("", ".", "..") or "\0" in name or "\\" in name:
        return False
    return Path(name).name == name


def shard_path(directory: str | Path, info: ShardInfo) -> Path:
    """The shard's file, refused (naming the index and the shard) where a symlink leads it out of
    the dataset's folder."""
    folder = Path(directory)
    path = folder / info.file
    try:
        target = path.resolve()
        inside = target.is_relative_to(folder.resolve())
    except (OSError, RuntimeError) as error:  # RuntimeError: a symlink loop
        raise DatasetError(f"shard {path} cannot be resolved ({error}); re-make the dataset") from None
    if not inside:
        raise DatasetError(
            f"{folder / INDEX} names shard {info.file!r}, which leads out of the dataset's folder (to "
            f"{target}); a dataset reads only its own shards: re-make the dataset"
        )
    return path


def check_shard_files(directory: str | Path, index: DatasetIndex) -> None:
    """Every shard exists with exactly the size the index gives it; else name the file and what is wrong."""
    for info in index.shards:
        path = shard_path(directory, info)
        _, _, expected = shard_layout(index.fields, info.records)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise DatasetError(
                f"shard {path} is missing ({INDEX} lists it with {info.records} records); restore it "
                "or re-make the dataset"
            ) from None
        if size != expected:
            raise DatasetError(
                f"shard {path} is {size} bytes, but {info.records} records take {expected}: it is "
                "truncated or was overwritten; re-make the dataset"
            )


@dataclass
class Shard:
    """One shard opened as memmaps: a (records, *shape) array per field and the records' crc32s."""

    path: Path
    columns: dict[str, np.ndarray]
    crcs: np.ndarray

    @classmethod
    def open(cls, directory: Path, info: ShardInfo, fields: Sequence[SampleField]) -> Shard:
        path = shard_path(directory, info)
        offsets, crc_offset, _ = shard_layout(fields, info.records)
        columns: dict[str, np.ndarray] = {}
        for f, offset in zip(fields, offsets, strict=True):
            shape = (info.records, *f.shape)
            columns[f.name] = np.memmap(path, dtype=f.numpy_dtype, mode="r", offset=offset, shape=shape)
        crcs = np.memmap(path, dtype="<u4", mode="r", offset=crc_offset, shape=(info.records,))
        return cls(path, columns, crcs)


def check_fits(index: DatasetIndex, spec: Sequence[SampleField], directory: str | Path, label: str) -> None:
    """The dataset's samples are what the problem ``label`` takes: same fields, shapes and dtypes, and
    integer values within its bounds. Else one line naming the field, what it takes and what is stored."""
    stored = {f.name: f for f in index.fields}
    wanted = {f.name: f for f in spec}
    remedy = "make a matching one with `flowrate data make --problem …`, or set the problem's shape to match"
    if set(stored) != set(wanted):
        raise ConfigError(
            "data",
            f"{directory} holds samples of {_fields(index.fields)}, but {label} takes "
            f"{_fields(spec)}; {remedy}",
        )
    for name, want in wanted.items():
        have = stored[name]
        if have.shape != want.shape or have.dtype != want.dtype:
            raise ConfigError(
                "data",
                f"field {name!r} of {directory} is {have.describe()}, but {label} takes {want.describe()}; "
                f"{remedy}",
            )
        span = index.value_range(name) if want.high is not None else None
        if span is not None and want.high is not None and (span[0] < 0 or span[1] >= want.high):
            raise ConfigError(
                "data",
                f"field {name!r} of {directory} holds values {span[0]}..{span[1]}, but {label} takes "
                f"0..{want.high - 1}; raise the problem's vocabulary or classes (e.g. --vocab-size "
                f"{span[1] + 1}), or re-make the dataset",
            )


def _fields(fields: Sequence[SampleField]) -> str:
    return ", ".join(f.describe() for f in fields)


def verify(directory: str | Path) -> int:
    """Read every record and check its crc32; return the number checked (a damaged one is named)."""
    folder = Path(directory)
    index = read_index(folder)
    check_shard_files(folder, index)
    checked = 0
    for info in index.shards:
        shard = Shard.open(folder, info, index.fields)
        columns = list(shard.columns.values())
        for record in range(info.records):
            check_record(shard, record, [c[record] for c in columns], checked + record)
        checked += info.records
    return checked


def check_record(shard: Shard, record: int, values: Sequence[np.ndarray], sample: int) -> None:
    """Raise DatasetError naming the shard file and record when ``values`` do not match its crc32."""
    if record_crc(values) != int(shard.crcs[record]):
        raise DamagedRecord(
            f"shard {shard.path} is corrupt: record {record} (sample {sample} of the dataset) fails its "
            "crc32 check; restore the file or re-make the dataset"
        )
