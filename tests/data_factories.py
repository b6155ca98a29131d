"""Small datasets with known contents, for the format, loader and analyzer tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from flowrate.data.writer import DatasetWriter
from flowrate.problems.sample import SampleField

# Sample i holds id i, pixels (i + 0 … i + 5) % 256 and label i % 5.
FIELDS = (
    SampleField("id", (), "int64"),
    SampleField("pixels", (2, 3), "uint8"),
    SampleField("label", (), "int64", 5),
)


def write_ids(directory: Path, samples: int, shards: int, chunk: int = 7) -> None:
    """Write ``samples`` of FIELDS into ``shards`` shards, ``chunk`` samples per write."""
    with DatasetWriter(directory, FIELDS, samples, shards, {"source": "test"}) as writer:
        for start in range(0, samples, chunk):
            ids = np.arange(start, min(samples, start + chunk), dtype=np.int64)
            pixels = (ids[:, None, None] + np.arange(6).reshape(1, 2, 3)).astype(np.uint8)
            writer.write({"id": ids, "pixels": pixels, "label": ids % 5})
