"""`flowrate data info` as text: a dataset described in (label, value) rows. Pure."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from flowrate.units import si

if TYPE_CHECKING:
    from flowrate.data.records import DatasetIndex


def info_rows(directory: str | Path, index: DatasetIndex) -> list[tuple[str, str]]:
    """The human description of a dataset, as (label, value) rows."""
    records = [s.records for s in index.shards]
    size = sum((Path(directory) / s.file).stat().st_size for s in index.shards)
    origin = dict(index.origin)
    source = origin.pop("source", "?")
    problem = origin.pop("problem", None)
    made_for = f"{problem['name']}/{problem['size']}" if isinstance(problem, dict) else "—"
    rows = [
        ("samples", f"{index.samples}"),
        ("shards", f"{len(records)} ({min(records)}–{max(records)} records each), {si(size, 'B')} on disk"),
        ("fields", ", ".join(f.describe() for f in index.fields)),
        ("made for", made_for),
        ("source", source),
    ]
    classes = origin.pop("classes", None)
    if classes:
        rows.append(
            ("classes", f"{len(classes)}: {', '.join(classes[:8])}" + (", …" if len(classes) > 8 else ""))
        )
    rows += [(key, str(value)) for key, value in origin.items()]
    return rows
