"""The results store: every run, its tags and every sweep point, in one SQLite file.

Why SQLite: one file a user can copy, no server, transactions, and safe concurrent writers. The
store runs in WAL mode with a busy timeout, and every write is one ``BEGIN IMMEDIATE``
transaction, so two processes recording at once (a sweep and a run in another terminal) never
lose a row and a reader never sees half a run.

Each run keeps its full Result as JSON (the source of truth) beside a few indexed columns that
listing and filtering need; the columns are derived from the JSON by flowrate.results.metrics.

The store's own format is versioned in ``PRAGMA user_version`` and identified by
``PRAGMA application_id``. Opening an older store migrates it forward in one transaction; a store
from a newer flowrate, a file that is not SQLite, or an SQLite file of something else is refused
with a message and left untouched (nothing is written before those checks pass).
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from flowrate.errors import FlowrateError
from flowrate.results.metrics import METRICS
from flowrate.results.schema import Result

ENV_VAR = "FLOWRATE_STORE"
DEFAULT_PATH = "flowrate.db"
APPLICATION_ID = 0x466C5752  # "FlWR": marks an SQLite file as a flowrate results store
BUSY_TIMEOUT_MS = 60_000

# History of the store format (bump with a migration below on any change):
#   1 (flowrate 0.1): runs (full Result JSON + indexed columns) and tags.
#   2: columns samples_per_joule, peak_memory_bytes, mfu, final_loss (backfilled from the JSON);
#      sweeps and sweep_points for `flowrate sweep` (resume, failed and skipped points).
STORE_VERSION = 2

_P = ParamSpec("_P")
_T = TypeVar("_T")


def store_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """--store, else $FLOWRATE_STORE, else ./flowrate.db."""
    return Path(explicit or os.environ.get(ENV_VAR) or DEFAULT_PATH)


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
        columns = _columns(result)
        return cls(
            run_id=result.run_id,
            created_at=result.created_at,
            tags=tuple(tags),
            result_json=result.to_json(indent=None),
            **{k: v for k, v in columns.items() if k not in ("run_id", "created_at", "flowrate_version")},
        )


@dataclass(frozen=True)
class RunFilter:
    """Which runs to list; every field that is set must match."""

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


def _damage_says_what(method: Callable[_P, _T]) -> Callable[_P, _T]:
    """sqlite3's damage errors become one line naming the store (busy waits are retried first)."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return method(*args, **kwargs)
        except sqlite3.DatabaseError as error:
            store = args[0]
            path = store.path if isinstance(store, Store) else "the results store"
            raise FlowrateError(
                f"the results store {path} could not be used ({error}); it may be damaged: "
                "move it aside (flowrate export can save what still reads) or give another --store"
            ) from None

    return wrapper


class Store:
    """An open results store. Use as a context manager, or call close()."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, create: bool = True) -> None:
        self.path = store_path(path)
        if not self.path.exists():
            if not create:
                raise FlowrateError(
                    f"no results store at {self.path}: `flowrate run` records runs there "
                    f"(or point --store / ${ENV_VAR} at another store)"
                )
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise FlowrateError(
                    f"cannot create the results store {self.path}: {error.strerror}"
                ) from None
        try:
            self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        except sqlite3.Error as error:
            raise FlowrateError(f"cannot open the results store {self.path}: {error}") from None
        try:
            self._check_identity()
            self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._use_wal()
            self._db.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except BaseException:
            self._db.close()
            raise

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    # --- opening: identity, version, migrations ---------------------------------------------

    def _check_identity(self) -> None:
        """Refuse anything but an empty file or a flowrate store this version reads, writing nothing."""
        try:  # one read transaction: a consistent view while another process creates the store
            self._db.execute("BEGIN")
            application_id = self._db.execute("PRAGMA application_id").fetchone()[0]
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            objects = self._db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
            self._db.execute("COMMIT")
        except sqlite3.DatabaseError as error:
            raise FlowrateError(
                f"{self.path} is not a flowrate results store ({error}); it was left untouched: "
                "give another --store, or move the file aside"
            ) from None
        if application_id != APPLICATION_ID and (objects or version):
            raise FlowrateError(
                f"{self.path} is an SQLite database but not a flowrate results store; it was left "
                "untouched: give another --store"
            )
        if version > STORE_VERSION:
            raise FlowrateError(
                f"the results store {self.path} was written by a newer flowrate (store version "
                f"{version}; this flowrate reads up to {STORE_VERSION}); it was left untouched: "
                "upgrade flowrate to use it"
            )

    def _use_wal(self) -> None:
        """Switch the file to WAL (it stays so); retry while another process holds a lock.

        SQLite answers "database is locked" at once, without waiting on the busy timeout, when a
        journal-mode change meets another connection's lock: two processes opening a new store
        together (a sweep and a run) would otherwise fail.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                mode = self._db.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() != "wal":
                    self._db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) and "busy" not in str(error):
                    raise
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def _migrate(self) -> None:
        if self.version() == STORE_VERSION:
            return
        with self._write() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]  # another process may have won
            for target in range(version + 1, STORE_VERSION + 1):
                _MIGRATIONS[target](db)
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {STORE_VERSION}")

    def version(self) -> int:
        version: int = self._db.execute("PRAGMA user_version").fetchone()[0]
        return version

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (BEGIN IMMEDIATE) so writers queue, never deadlock."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # --- runs ---------------------------------------------------------------------------------

    @_damage_says_what
    def add(self, result: Result, tags: Sequence[str] = ()) -> None:
        """Record one run and its tags in one transaction."""
        with self._write() as db:
            _insert_run(db, result, tags)

    @_damage_says_what
    def add_many(self, entries: Sequence[tuple[Result, Sequence[str]]]) -> list[str]:
        """Record runs in one transaction, all or none; runs already present are left as they are.

        Returns the run ids that were new.
        """
        added = []
        with self._write() as db:
            for result, tags in entries:
                if db.execute("SELECT 1 FROM runs WHERE run_id = ?", (result.run_id,)).fetchone():
                    continue
                _insert_run(db, result, tags)
                added.append(result.run_id)
        return added

    @_damage_says_what
    def add_tags(self, run_id: str, tags: Sequence[str]) -> None:
        with self._write() as db:
            db.executemany(
                "INSERT OR IGNORE INTO tags (run_id, tag) VALUES (?, ?)", [(run_id, t) for t in tags]
            )

    @_damage_says_what
    def runs(self, where: RunFilter | None = None) -> list[StoredRun]:
        """Matching runs, newest first."""
        clauses, params = _filter_sql(where or RunFilter())
        sql = f"SELECT {_RUN_FIELDS} FROM runs"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY created_at DESC, rowid DESC"
        if where and where.limit is not None:
            sql += f" LIMIT {int(where.limit)}"
        return self._with_tags(self._db.execute(sql, params).fetchall())

    @_damage_says_what
    def get(self, ref: str) -> StoredRun:
        """One run by its id or a unique prefix of it (4 characters or more)."""
        matches = self._by_id(ref)
        if not matches:
            raise FlowrateError(f"no run {ref!r} in {self.path}; `flowrate runs` lists them")
        if len(matches) > 1:
            ids = ", ".join(m.run_id for m in matches[:5])
            raise FlowrateError(f"{ref!r} names {len(matches)} runs ({ids}…); give more of the id")
        return matches[0]

    @_damage_says_what
    def resolve(self, ref: str) -> list[StoredRun]:
        """The runs a reference names: a run id (or unique prefix), else every run with that tag."""
        matches = self._by_id(ref)
        if len(matches) == 1:
            return matches
        tagged = self.runs(RunFilter(tag=ref))
        if tagged:
            return tagged
        if len(matches) > 1:
            return [self.get(ref)]  # raises: ambiguous prefix
        raise FlowrateError(
            f"{ref!r} is no run id, tag or result file in {self.path}; `flowrate runs` lists runs and tags"
        )

    def _by_id(self, ref: str) -> list[StoredRun]:
        ref = ref.strip()
        if len(ref) < 4 or not re.fullmatch(r"[0-9a-fA-F]+", ref):
            rows = self._db.execute(f"SELECT {_RUN_FIELDS} FROM runs WHERE run_id = ?", (ref,)).fetchall()
        else:
            rows = self._db.execute(
                f"SELECT {_RUN_FIELDS} FROM runs WHERE run_id LIKE ? ORDER BY run_id LIMIT 6",
                (ref.lower() + "%",),
            ).fetchall()
        exact = [r for r in rows if r[0] == ref]
        return self._with_tags(exact or rows)

    def _with_tags(self, rows: list[tuple[Any, ...]]) -> list[StoredRun]:
        tags: dict[str, list[str]] = {}
        ids = [r[0] for r in rows]
        for start in range(0, len(ids), 500):  # SQLite limits bound parameters
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for run_id, tag in self._db.execute(
                f"SELECT run_id, tag FROM tags WHERE run_id IN ({marks}) ORDER BY tag", chunk
            ):
                tags.setdefault(run_id, []).append(tag)
        names = _RUN_FIELDS.split(", ")
        return [StoredRun(**dict(zip(names, r, strict=True)), tags=tuple(tags.get(r[0], ()))) for r in rows]

    @_damage_says_what
    def all_tags(self) -> dict[str, int]:
        """Every tag with its number of runs."""
        rows = self._db.execute("SELECT tag, count(*) FROM tags GROUP BY tag ORDER BY tag")
        return {tag: n for tag, n in rows}

    # --- sweeps ---------------------------------------------------------------------------------

    @_damage_says_what
    def open_sweep(self, sweep_id: str, name: str, spec: dict[str, Any]) -> bool:
        """Register a sweep; False when it was already there (a resume)."""
        with self._write() as db:
            cursor = db.execute(
                "INSERT OR IGNORE INTO sweeps (sweep_id, name, created_at, spec_json) VALUES (?, ?, ?, ?)",
                (sweep_id, name, _now(), json.dumps(spec, sort_keys=True)),
            )
            return cursor.rowcount == 1

    @_damage_says_what
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

    @_damage_says_what
    def sweep_points(self, sweep_id: str) -> dict[str, SweepPoint]:
        rows = self._db.execute(
            "SELECT point_key, params_json, status, run_id, reason, recorded_at FROM sweep_points "
            "WHERE sweep_id = ? ORDER BY recorded_at",
            (sweep_id,),
        )
        return {r[0]: SweepPoint(r[0], json.loads(r[1]), r[2], r[3], r[4], r[5]) for r in rows}

    @_damage_says_what
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
                _insert_run(db, result, tags)
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


# --- rows ---------------------------------------------------------------------------------------

# the indexed columns of a run, in the order SELECTs return them
_RUN_FIELDS = (
    "run_id, created_at, problem, size, mode, precision, execution, device_type, device_name, "
    "batch_size, "
    "samples_per_sec, samples_per_joule, peak_memory_bytes, mfu, final_loss, result_json"
)


def _columns(result: Result) -> dict[str, Any]:
    """The indexed columns of a run, all derived from its Result."""
    config = result.config
    device = result.environment.get("device") or {}
    return {
        "run_id": result.run_id,
        "created_at": result.created_at,
        "problem": result.problem.get("name") or config.get("problem") or "?",
        "size": result.problem.get("size"),
        "mode": config.get("mode"),
        "precision": config.get("precision"),
        "execution": config.get("execution"),
        "device_type": device.get("type"),
        "device_name": device.get("name") or device.get("type"),
        "batch_size": result.batch_size,
        "flowrate_version": result.flowrate_version,
        **{name: METRICS[name].value(result) for name in _METRIC_COLUMNS},
    }


_METRIC_COLUMNS = ("samples_per_sec", "samples_per_joule", "peak_memory_bytes", "mfu", "final_loss")


def _insert_run(db: sqlite3.Connection, result: Result, tags: Sequence[str]) -> None:
    if not result.run_id:
        raise FlowrateError("a result without a run_id cannot be stored")
    columns = _columns(result)
    columns["result_json"] = result.to_json(indent=None)
    names = ", ".join(columns)
    marks = ", ".join("?" * len(columns))
    try:
        db.execute(f"INSERT INTO runs ({names}) VALUES ({marks})", list(columns.values()))
    except sqlite3.IntegrityError:
        raise FlowrateError(f"run {result.run_id} is already in the store") from None
    db.executemany(
        "INSERT OR IGNORE INTO tags (run_id, tag) VALUES (?, ?)", [(result.run_id, t) for t in tags]
    )


def _filter_sql(where: RunFilter) -> tuple[list[str], list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if where.problem:
        family, _, size = where.problem.partition("/")
        clauses.append("problem = ?")
        params.append(family)
        if size:
            clauses.append("size = ?")
            params.append(size)
    if where.device:
        clauses.append("(lower(device_name) LIKE ? OR device_type = ?)")
        params += [f"%{where.device.lower()}%", where.device.lower()]
    for column in ("precision", "mode", "execution"):
        value = getattr(where, column)
        if value:
            clauses.append(f"{column} = ?")
            params.append(value)
    if where.tag:
        clauses.append("run_id IN (SELECT run_id FROM tags WHERE tag = ?)")
        params.append(where.tag)
    if where.sweep:
        clauses.append(
            "run_id IN (SELECT p.run_id FROM sweep_points p JOIN sweeps s USING (sweep_id) "
            "WHERE s.sweep_id LIKE ? OR s.name = ?)"
        )
        params += [where.sweep + "%", where.sweep]
    if where.since:
        clauses.append("created_at >= ?")
        params.append(_instant(where.since, "since"))
    if where.until:
        clauses.append("created_at < ?")
        params.append(_instant(where.until, "until", end_of_day=True))
    return clauses, params


def _instant(text: str, name: str, end_of_day: bool = False) -> str:
    """An ISO instant in UTC, comparable with created_at: from a date, a date-time, or '7d'/'12h'."""
    now = dt.datetime.now(dt.UTC)
    ago = re.fullmatch(r"\s*(\d+)\s*([dhm])\s*", text)
    if ago:
        unit = {"d": "days", "h": "hours", "m": "minutes"}[ago[2]]
        return (now - dt.timedelta(**{unit: int(ago[1])})).isoformat(timespec="seconds")
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text.strip()):
            day = dt.date.fromisoformat(text.strip()) + dt.timedelta(days=1 if end_of_day else 0)
            moment = dt.datetime.combine(day, dt.time(), dt.UTC)
        else:
            moment = dt.datetime.fromisoformat(text.strip())
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=dt.UTC)
    except ValueError:
        raise FlowrateError(
            f"--{name}: cannot read {text!r} as a date; use 2026-11-21, 2026-11-21T14:00 or 7d / 12h ago"
        ) from None
    return moment.astimezone(dt.UTC).isoformat(timespec="seconds")


# --- migrations: _MIGRATIONS[n] takes a store from version n-1 to n -----------------------------


def _create_v1(db: sqlite3.Connection) -> None:
    db.execute(
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            problem TEXT NOT NULL,
            size TEXT,
            mode TEXT,
            precision TEXT,
            execution TEXT,
            device_type TEXT,
            device_name TEXT,
            batch_size INTEGER,
            samples_per_sec REAL,
            flowrate_version TEXT,
            result_json TEXT NOT NULL
        )"""
    )
    db.execute("CREATE INDEX runs_created_at ON runs (created_at)")
    db.execute("CREATE INDEX runs_problem ON runs (problem, size)")
    db.execute(
        """CREATE TABLE tags (
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            tag TEXT NOT NULL,
            PRIMARY KEY (run_id, tag)
        )"""
    )
    db.execute("CREATE INDEX tags_tag ON tags (tag)")


def _v1_to_v2(db: sqlite3.Connection) -> None:
    new_columns = {
        "samples_per_joule": "REAL",
        "peak_memory_bytes": "REAL",
        "mfu": "REAL",
        "final_loss": "REAL",
    }
    for name, kind in new_columns.items():
        db.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind}")
    rows = db.execute("SELECT run_id, result_json FROM runs").fetchall()
    for run_id, text in rows:
        result = Result.from_json(text)
        values = [METRICS[name].value(result) for name in new_columns]
        sets = ", ".join(f"{name} = ?" for name in new_columns)
        db.execute(f"UPDATE runs SET {sets} WHERE run_id = ?", [*values, run_id])
    db.execute(
        """CREATE TABLE sweeps (
            sweep_id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            created_at TEXT NOT NULL,
            spec_json TEXT NOT NULL
        )"""
    )
    db.execute(
        """CREATE TABLE sweep_points (
            sweep_id TEXT NOT NULL REFERENCES sweeps (sweep_id) ON DELETE CASCADE,
            point_key TEXT NOT NULL,
            params_json TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('done', 'failed', 'skipped')),
            run_id TEXT REFERENCES runs (run_id),
            reason TEXT,
            recorded_at TEXT NOT NULL,
            PRIMARY KEY (sweep_id, point_key)
        )"""
    )


_MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _create_v1, 2: _v1_to_v2}
