"""The sample a problem declares: its fields' names, shapes, dtypes and value bounds.

A dataset on disk (flowrate.data.records) stores samples of this shape, and a problem checks a
dataset against it before a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

DTYPES = ("uint8", "uint16", "uint32", "int32", "int64", "float16", "float32")


def token_dtype(vocab_size: int) -> str:
    """The smallest unsigned dtype holding token ids below ``vocab_size`` (uint16 up to 65536 ids,
    as nanoGPT stores GPT-2's; uint32 beyond)."""
    return "uint16" if vocab_size <= 2**16 else "uint32"


@dataclass(frozen=True)
class SampleField:
    """One field of a stored sample: e.g. tokens (1025,) uint16 with values below 50257."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # a numpy dtype name from DTYPES
    high: int | None = None  # integer fields: every value lies in [0, high) (vocabulary, classes)

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"field {self.name!r}: dtype {self.dtype!r} is not one of {', '.join(DTYPES)}")
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))

    @property
    def numpy_dtype(self) -> np.dtype[Any]:
        return np.dtype(self.dtype).newbyteorder("<")

    @property
    def is_integer(self) -> bool:
        return np.issubdtype(self.numpy_dtype, np.integer)

    @property
    def record_bytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.numpy_dtype.itemsize

    def describe(self) -> str:
        shape = "(" + ", ".join(str(s) for s in self.shape) + ("," if len(self.shape) == 1 else "") + ")"
        bound = f" < {self.high}" if self.high is not None else ""
        return f"{self.name} {shape} {self.dtype}{bound}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "high": self.high}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SampleField:
        return cls(str(data["name"]), tuple(data["shape"]), str(data["dtype"]), data.get("high"))
