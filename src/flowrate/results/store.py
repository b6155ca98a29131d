"""The results store: every run, its tags and every sweep point, in one SQLite file.

Why SQLite: one file a user can copy, no server, transactions, and safe concurrent writers. The
store runs in WAL mode, and every write is one ``BEGIN IMMEDIATE`` transaction, so two processes
recording at once (a sweep and a run in another terminal) never lose a row and a reader never
sees half a run. A store another process holds locked is waited for, saying so, and Ctrl-C stops
the wait (store_lock.py); an SQLite failure is one line saying what it means: a full disk, a
damaged file, or another (store_errors.py).

Each run keeps its full Result as JSON (the source of truth) beside a few indexed columns that
listing and filtering need, derived from the JSON (store_schema.py; opening: store_open.py; which
runs a query selects: store_filter.py). Every
run read is checked (validate.py): one flowrate cannot read (written by an older flowrate, or by
hand) is skipped with a SkippedRunWarning saying why, so every other run still lists, reports and
plots. Tags are one short line of text each, checked where added.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import re
import sqlite3
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from flowrate.errors import FlowrateError
from flowrate.results.schema import Result
from flowrate.results.store_errors import store_failure
from flowrate.results.store_filter import RunFilter, like_sql
from flowrate.results.store_lock import patiently
from flowrate.results.store_open import check_writable as _check_writable
from flowrate.results.store_open import connect
from flowrate.results.store_schema import (
    RUN_FIELDS,
    columns,
    insert_run,
    row_problem,
    tags_of,
    transaction,
)
from flowrate.results.validate import InvalidResult, check_tags, shown

ENV_VAR = "FLOWRATE_STORE"
DEFAULT_PATH = "flowrate.db"

_P = ParamSpec("_P")
_T = TypeVar("_T")


def store_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """--store, else $FLOWRATE_STORE, else ./flowrate.db."""
    return Path(explicit or os.environ.get(ENV_VAR) or DEFAULT_PATH)


def check_writable(store: str | os.PathLike[str] | None = None) -> None:
    """Refuse, with the true reason, a store this process could not record into: call it before a
    long measurement whose result goes to the store (Store() in writing mode also checks)."""
    _check_writable(store_path(store))


class SkippedRunWarning(UserWarning):
    """A run in the store that cannot be read was left out; the message names it and says why."""


@dataclass(frozen=True)
class StoredRun:
    """A run as listed: its indexed columns, its tags, and the full Result on demand."""

    run_id: str
    created_at: str
    problem: str
    size: str | None
    mode: str | None
    precision: str | None
    execution: str | None
    device_type: str | None
    device_name: str | None
    batch_size: int | None
    samples_per_sec: float | None
    samples_per_joule: float | None
    peak_memory_bytes: float | None
    mfu: float | None
    final_loss: float | None
    tags: tuple[str, ...]
    result_json: str = field(repr=False)

    @functools.cached_property
    def result(self) -> Result:
        return Result.from_json(self.result_json)

    @classmethod
    def from_result(cls, result: Result, tags: Sequence[str] = ()) -> StoredRun:
        """A result that lives in a file, not the store, in the same shape."""
        values = columns(result)
        return cls(
            run_id=result.run_id,
            created_at=result.created_at,
            tags=tuple(tags),
            result_json=result.to_json(indent=None),
            **{k: v for k, v in values.items() if k not in ("run_id", "created_at", "flowrate_version")},
        )


@dataclass(frozen=True)
class SweepPoint:
    """One recorded point of a sweep: done (with its run), failed, or skipped (with the reason)."""

    key: str  # canonical JSON of the point's options
    params: dict[str, Any]
    status: str  # "done", "failed" or "skipped"
    run_id: str | None
    reason: str | None
    recorded_at: str


POINT_STATUSES = ("done", "failed", "skipped")


def _said_in_one_line(method: Callable[_P, _T]) -> Callable[_P, _T]:
    """The store's method, tried again while another process holds the store locked
    (store_lock.py); an SQLite failure becomes one line naming the store (store_errors.py)."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        store = args[0]
        assert isinstance(store, Store)
        try:
            return patiently(store.path, lambda: method(*args, **kwargs))
        except sqlite3.DatabaseError as error:
            raise store_failure(error, store.path, store._db) from None

    return wrapper


class Store:
    """An open results store. Use as a context manager, or call close().

    By default the store must be writable (it is created where there is none): a read-only one is
    refused at once, with the reason, before anything is measured for it. ``create=False``: the
    store must exist, and one this process cannot write (a read-only file or folder) opens
    read-only instead of being refused. ``readonly=True`` also refuses every write.
    """

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, create: bool = True, readonly: bool = False
    ) -> None:
        self.path = store_path(path)
        if not self.path.exists() and (readonly or not create):
            raise FlowrateError(
                f"no results store at {self.path}: `flowrate run` records runs there "
                f"(or point --store / ${ENV_VAR} at another store)"
            )
        self._db, read_only_file = connect(self.path, readonly=readonly or not create)
        self.readonly = readonly or read_only_file

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    def version(self) -> int:
        version: int = self._db.execute("PRAGMA user_version").fetchone()[0]
        return version

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        if self.readonly:
            _check_writable(self.path)  # raises, with the reason, where the file is read-only
            raise FlowrateError(f"the results store {self.path} was opened for reading only")
        with transaction(self._db) as db:
            yield db

    # --- runs ---------------------------------------------------------------------------------

    @_said_in_one_line
    def add(self, result: Result, tags: Sequence[str] = ()) -> None:
        """Record one run and its tags in one transaction."""
        with self._write() as db:
            insert_run(db, result, tags)

    @_said_in_one_line
    def add_many(self, entries: Sequence[tuple[Result, Sequence[str]]]) -> list[str]:
        """Record runs in one transaction, all or none; runs already present are left as they are.

        Returns the run ids that were new.
        """
        added = []
        with self._write() as db:
            for result, tags in entries:
                if db.execute("SELECT 1 FROM runs WHERE run_id = ?", (result.run_id,)).fetchone():
                    continue
                insert_run(db, result, tags)
                added.append(result.run_id)
        return added

    @_said_in_one_line
    def add_tags(self, run_id: str, tags: Sequence[str]) -> None:
        check_tags(tags)
        with self._write() as db:
            db.executemany(
                "INSERT OR IGNORE INTO tags (run_id, tag) VALUES (?, ?)", [(run_id, t) for t in tags]
            )

    @_said_in_one_line
    def runs(self, where: RunFilter | None = None) -> list[StoredRun]:
        """Matching runs, newest first (those that cannot be read are skipped, with a warning)."""
        clauses, params = (where or RunFilter()).sql()
        sql = f"SELECT {RUN_FIELDS} FROM runs"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY created_at DESC, rowid DESC"
        if where and where.limit is not None:
            sql += f" LIMIT {int(where.limit)}"
        return self._readable(self._db.execute(sql, params).fetchall())[0]

    @_said_in_one_line
    def newest_like(self, results: Sequence[Result], limit: int) -> list[StoredRun]:
        """The newest ``limit`` runs (newest first) whose problem, mode, precision, execution and
        batch size (indexed columns) are those of one of ``results``: where a configuration's
        history can come from, found without reading every record."""
        if not results or limit < 1:
            return []
        clause, params = like_sql(results)
        newest = f"ORDER BY created_at DESC, rowid DESC LIMIT {int(limit)}"
        sql = f"SELECT {RUN_FIELDS} FROM runs WHERE {clause} {newest}"
        return self._readable(self._db.execute(sql, params).fetchall())[0]

    @_said_in_one_line
    def get(self, ref: str) -> StoredRun:
        """One run by its id or a unique prefix of it (4 characters or more)."""
        matches, skipped = self._by_id(ref)
        if not matches and skipped:
            run_id, reason = next(iter(skipped.items()))
            raise InvalidResult(f"run {run_id} in {self.path} cannot be read: {reason}")
        if not matches:
            raise FlowrateError(f"no run {ref!r} in {self.path}; `flowrate runs` lists them")
        if len(matches) > 1:
            ids = ", ".join(m.run_id for m in matches[:5])
            raise FlowrateError(f"{ref!r} names {len(matches)} runs ({ids}…); give more of the id")
        return matches[0]

    @_said_in_one_line
    def resolve(self, ref: str) -> list[StoredRun]:
        """The runs a reference names: a run id (or unique prefix), else every run with that tag."""
        if not ref.strip():
            raise FlowrateError("an empty run reference: give a run id, a tag or a result file")
        matches, skipped = self._by_id(ref)
        if len(matches) == 1:
            return matches
        tagged = self.runs(RunFilter(tag=ref))
        if tagged:
            return tagged
        if len(matches) > 1 or skipped:
            return [self.get(ref)]  # raises: ambiguous prefix, or the run cannot be read
        raise FlowrateError(
            f"{ref!r} is no run id, tag or result file in {self.path}; `flowrate runs` lists runs and tags"
        )

    def _by_id(self, ref: str) -> tuple[list[StoredRun], dict[str, str]]:
        ref = ref.strip()
        if len(ref) < 4 or not re.fullmatch(r"[0-9a-fA-F]+", ref):
            rows = self._db.execute(f"SELECT {RUN_FIELDS} FROM runs WHERE run_id = ?", (ref,)).fetchall()
        else:
            rows = self._db.execute(
                f"SELECT {RUN_FIELDS} FROM runs WHERE run_id LIKE ? ORDER BY run_id LIMIT 6",
                (ref.lower() + "%",),
            ).fetchall()
        exact = [r for r in rows if r[0] == ref]
        return self._readable(exact or rows)

    def _readable(self, rows: list[tuple[Any, ...]]) -> tuple[list[StoredRun], dict[str, str]]:
        """The rows as runs with their tags, and {run id: why} for those that cannot be read."""
        names = RUN_FIELDS.split(", ")
        good: list[dict[str, Any]] = []
        skipped: dict[str, str] = {}
        for row in rows:
            values = dict(zip(names, row, strict=True))
            problem = row_problem(values)
            if problem is None:
                good.append(values)
                continue
            skipped[str(values["run_id"])] = problem
            warnings.warn(
                SkippedRunWarning(f"run {shown(values['run_id'])} in {self.path} is skipped: {problem}"),
                stacklevel=4,
            )
        tags = tags_of(self._db, [v["run_id"] for v in good])
        runs = [StoredRun(**v, tags=tuple(tags.get(v["run_id"], ()))) for v in good]
        return runs, skipped

    @_said_in_one_line
    def all_tags(self) -> dict[str, int]:
        """Every tag with its number of runs."""
        rows = self._db.execute("SELECT tag, count(*) FROM tags GROUP BY tag ORDER BY tag")
        return {tag: n for tag, n in rows}

    # --- sweeps ---------------------------------------------------------------------------------

    @_said_in_one_line
    def open_sweep(self, sweep_id: str, name: str, spec: dict[str, Any]) -> bool:
        """Register a sweep; False when it was already there (a resume)."""
        with self._write() as db:
            cursor = db.execute(
                "INSERT OR IGNORE INTO sweeps (sweep_id, name, created_at, spec_json) VALUES (?, ?, ?, ?)",
                (sweep_id, name, _now(), json.dumps(spec, sort_keys=True)),
            )
            return cursor.rowcount == 1

    @_said_in_one_line
    def sweeps(self) -> list[dict[str, Any]]:
        """Every sweep with its counts of done, failed and skipped points, newest first."""
        rows = self._db.execute(
            "SELECT s.sweep_id, s.name, s.created_at, s.spec_json, "
            "sum(p.status = 'done'), sum(p.status = 'failed'), sum(p.status = 'skipped') "
            "FROM sweeps s LEFT JOIN sweep_points p USING (sweep_id) "
            "GROUP BY s.sweep_id ORDER BY s.created_at DESC"
        ).fetchall()
        return [
            {
                "sweep_id": r[0],
                "name": r[1],
                "created_at": r[2],
                "spec": json.loads(r[3]),
                "done": r[4] or 0,
                "failed": r[5] or 0,
                "skipped": r[6] or 0,
            }
            for r in rows
        ]

    @_said_in_one_line
    def sweep_points(self, sweep_id: str) -> dict[str, SweepPoint]:
        rows = self._db.execute(
            "SELECT point_key, params_json, status, run_id, reason, recorded_at FROM sweep_points "
            "WHERE sweep_id = ? ORDER BY recorded_at",
            (sweep_id,),
        )
        return {r[0]: SweepPoint(r[0], json.loads(r[1]), r[2], r[3], r[4], r[5]) for r in rows}

    @_said_in_one_line
    def record_point(
        self,
        sweep_id: str,
        params: dict[str, Any],
        status: str,
        *,
        result: Result | None = None,
        reason: str | None = None,
        tags: Sequence[str] = (),
    ) -> SweepPoint:
        """Record a sweep point, and its run when it has one, in one transaction."""
        if status not in POINT_STATUSES:
            raise ValueError(f"status must be one of {POINT_STATUSES}, got {status!r}")
        if (status == "done") != (result is not None):
            raise ValueError("a done point has a result; a failed or skipped one has none")
        key = point_key(params)
        recorded_at = _now()
        with self._write() as db:
            if result is not None:
                insert_run(db, result, tags)
            db.execute(
                "INSERT OR REPLACE INTO sweep_points "
                "(sweep_id, point_key, params_json, status, run_id, reason, recorded_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    sweep_id,
                    key,
                    json.dumps(params, sort_keys=True),
                    status,
                    result.run_id if result else None,
                    reason,
                    recorded_at,
                ),
            )
        return SweepPoint(key, params, status, result.run_id if result else None, reason, recorded_at)


def point_key(params: dict[str, Any]) -> str:
    """The identity of a sweep point: its options as canonical JSON."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")
