"""`flowrate noise` as text and JSON: one row per configuration on a machine.

Pure: NoiseRows in, rows of cells or a JSON-ready list out.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from flowrate.units import DASH, compact

if TYPE_CHECKING:
    from flowrate.results.noise import NoiseRow

HEADER = [
    "problem",
    "configuration",
    "machine",
    "runs",
    "samples/s",
    "between-run CV",
    "within-run CV",
    "ICC",
]
RIGHT_ALIGNED = (3, 4, 5, 6, 7)
LEGEND = (
    "Each run (process) is one value, its median samples/s. between-run CV: their spread, pooled "
    "over the commits they ran (what compare uses when a side has too few runs); within-run CV: "
    "the mean spread of a run's own intervals; ICC: the share of one interval's variance that is "
    "its run's offset — high means more intervals cannot replace more runs."
)


def _fields(values: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items() if v is not None and k not in skip)


def _percent(value: float | None) -> str:
    return DASH if value is None else f"{value:.1%}"


def rows(table: list[NoiseRow]) -> list[list[str]]:
    return [
        [
            _fields(r.problem),
            _fields(r.configuration),
            _fields(r.machine),
            str(r.runs),
            compact(r.mean_samples_per_sec),
            _percent(r.between_cv),
            _percent(r.within_cv),
            DASH if r.icc is None else f"{r.icc:.2f}",
        ]
        for r in table
    ]


def to_json(table: list[NoiseRow]) -> list[dict[str, Any]]:
    return [{k: v for k, v in asdict(r).items() if k != "key"} for r in table]
