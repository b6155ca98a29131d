"""Which runs a query of the results store selects: a listing's filter (RunFilter) and the runs
that may share a configuration (like_sql), as SQL over the store's indexed columns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from flowrate.errors import ConfigError
from flowrate.results.schema import Result
from flowrate.results.store_schema import columns, created_at_bound

LIKE_COLUMNS = ("problem", "mode", "precision", "execution", "batch_size")  # like_sql matches these


@dataclass(frozen=True)
class RunFilter:
    """Which runs to list; every field that is set must match. An empty text is refused, never
    taken for "no filter"."""

    problem: str | None = None  # family name, or family/size
    device: str | None = None  # a case-insensitive part of the device name or type
    precision: str | None = None
    mode: str | None = None
    execution: str | None = None
    tag: str | None = None
    sweep: str | None = None  # a sweep id (or its prefix) or name
    since: str | None = None  # ISO date or time, or "7d" / "12h" ago
    until: str | None = None  # ISO date (inclusive) or time
    limit: int | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, str) and not value.strip():
                raise ConfigError(
                    f.name, f"must not be empty (got {value!r}); leave the option out for every run"
                )

    def sql(self) -> tuple[list[str], list[Any]]:
        """The WHERE clauses (joined by AND) and their parameters that select these runs."""
        clauses: list[str] = []
        params: list[Any] = []
        if self.problem:
            family, _, size = self.problem.partition("/")
            clauses.append("problem = ?")
            params.append(family)
            if size:
                clauses.append("size = ?")
                params.append(size)
        if self.device:
            clauses.append("(lower(device_name) LIKE ? OR device_type = ?)")
            params += [f"%{self.device.lower()}%", self.device.lower()]
        for column in ("precision", "mode", "execution"):
            value = getattr(self, column)
            if value:
                clauses.append(f"{column} = ?")
                params.append(value)
        if self.tag:
            clauses.append("run_id IN (SELECT run_id FROM tags WHERE tag = ?)")
            params.append(self.tag)
        if self.sweep:
            clauses.append(
                "run_id IN (SELECT p.run_id FROM sweep_points p JOIN sweeps s USING (sweep_id) "
                "WHERE s.sweep_id LIKE ? OR s.name = ?)"
            )
            params += [self.sweep + "%", self.sweep]
        if self.since:
            clauses.append("created_at >= ?")
            params.append(created_at_bound(self.since, "since"))
        if self.until:
            clauses.append("created_at < ?")
            params.append(created_at_bound(self.until, "until", end_of_day=True))
        return clauses, params


def like_sql(results: Sequence[Result]) -> tuple[str, list[Any]]:
    """A WHERE clause and its parameters selecting the runs whose LIKE_COLUMNS are those of one of
    ``results``."""
    keys = sorted({tuple(columns(r)[c] for c in LIKE_COLUMNS) for r in results}, key=str)
    one = "(" + " AND ".join(f"{c} IS ?" for c in LIKE_COLUMNS) + ")"
    return " OR ".join([one] * len(keys)), [value for key in keys for value in key]
