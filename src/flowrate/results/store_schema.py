"""The store's tables: its version history, the columns derived from a Result, what a row must hold
to be read, and the migrations.

The store's own format is versioned in ``PRAGMA user_version`` and identified by
``PRAGMA application_id``. Opening an older store migrates it forward in one transaction
(results/store_open.py decides when); ``MIGRATIONS[n]`` takes a store from version n-1 to n.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from flowrate.errors import ConfigError, FlowrateError
from flowrate.results.configs import SharedConfig, as_text
from flowrate.results.environment import DeviceInfo
from flowrate.results.metrics import METRICS
from flowrate.results.schema import SCHEMA_VERSION, Result
from flowrate.results.validate import InvalidResult, check_tags, shown, validate_record

APPLICATION_ID = 0x466C5752  # "FlWR": marks an SQLite file as a flowrate results store

# History of the store format (bump with a migration below on any change):
#   1 (flowrate 0.1): runs (full Result JSON + indexed columns) and tags.
#   2: columns samples_per_joule, peak_memory_bytes, mfu, final_loss (backfilled from the JSON);
#      sweeps and sweep_points for `flowrate sweep` (resume, failed and skipped points).
STORE_VERSION = 2

# the indexed columns of a run, in the order SELECTs return them
RUN_FIELDS = (
    "run_id, created_at, problem, size, mode, precision, execution, device_type, device_name, "
    "batch_size, "
    "samples_per_sec, samples_per_joule, peak_memory_bytes, mfu, final_loss, result_json"
)
METRIC_COLUMNS = ("samples_per_sec", "samples_per_joule", "peak_memory_bytes", "mfu", "final_loss")


def columns(result: Result) -> dict[str, Any]:
    """The indexed columns of a run, all derived from its Result."""
    config: SharedConfig = result.config
    device = result.environment.device or DeviceInfo()
    return {
        "run_id": result.run_id,
        "created_at": result.created_at,
        "problem": result.problem.name or config.problem or "?",
        "size": result.problem.size,
        "mode": as_text(config.mode),
        "precision": as_text(config.precision),
        "execution": as_text(config.execution),
        "device_type": device.type,
        "device_name": device.name or device.type,
        "batch_size": result.batch_size,
        "flowrate_version": result.flowrate_version,
        **{name: METRICS[name].value(result) for name in METRIC_COLUMNS},
    }


def insert_run(db: sqlite3.Connection, result: Result, tags: Sequence[str]) -> None:
    """Insert one run and its tags; a record its readers would refuse is refused here."""
    if not result.run_id:
        raise FlowrateError("a result without a run_id cannot be stored")
    check_tags(tags)
    text = result.to_json(indent=None)
    validate_record(json.loads(text), SCHEMA_VERSION)  # exactly what readers will see
    values = columns(result)
    values["result_json"] = text
    names = ", ".join(values)
    marks = ", ".join("?" * len(values))
    try:
        db.execute(f"INSERT INTO runs ({names}) VALUES ({marks})", list(values.values()))
    except sqlite3.IntegrityError:
        raise FlowrateError(f"run {result.run_id} is already in the store") from None
    db.executemany(
        "INSERT OR IGNORE INTO tags (run_id, tag) VALUES (?, ?)", [(result.run_id, t) for t in tags]
    )


# what each column of a readable row holds (sqlite3 gives back str, int, float or None)
_TEXT = (str,)
_MAYBE_TEXT = (str, type(None))
_MAYBE_NUMBER = (int, float, type(None))
COLUMN_TYPES: dict[str, tuple[type, ...]] = {
    "run_id": _TEXT,
    "created_at": _TEXT,
    "problem": _TEXT,
    **dict.fromkeys(["size", "mode", "precision", "execution", "device_type", "device_name"], _MAYBE_TEXT),
    "batch_size": (int, type(None)),
    **dict.fromkeys(METRIC_COLUMNS, _MAYBE_NUMBER),
    "result_json": _TEXT,
}


def row_problem(row: dict[str, Any]) -> str | None:
    """Why a row of runs (RUN_FIELDS by name) cannot be read, or None when it can.

    Its columns must hold what listing and sorting expect, its JSON a valid Result with the row's
    run id (a row written by an older flowrate, or by hand, may not).
    """
    for name, types in COLUMN_TYPES.items():
        value = row[name]
        if not isinstance(value, types) or (isinstance(value, float) and not math.isfinite(value)):
            return f"its {name} column holds {shown(value)}"
    try:  # the record is checked here, not built: StoredRun.result builds it when asked
        data = json.loads(row["result_json"])
        if not isinstance(data, dict):
            return "its result record is not a JSON object"
        validate_record(data, SCHEMA_VERSION)
    except json.JSONDecodeError as error:
        return f"its result record is not JSON ({error.msg})"
    except RecursionError:
        return "its result record is JSON nested too deeply"
    except InvalidResult as error:
        return str(error)
    if data.get("run_id") != row["run_id"]:
        return f"its row and its result record disagree on the run id ({shown(data.get('run_id'))})"
    return None


def tags_of(db: sqlite3.Connection, ids: Sequence[str]) -> dict[str, list[str]]:
    """{run id: its tags, sorted} for the runs ``ids``."""
    tags: dict[str, list[str]] = {}
    for start in range(0, len(ids), 500):  # SQLite limits bound parameters
        chunk = list(ids[start : start + 500])
        marks = ",".join("?" * len(chunk))
        for run_id, tag in db.execute(
            f"SELECT run_id, tag FROM tags WHERE run_id IN ({marks}) ORDER BY tag", chunk
        ):
            tags.setdefault(run_id, []).append(tag)
    return tags


def created_at_bound(text: str, name: str, end_of_day: bool = False) -> str:
    """An ISO instant in UTC, comparable with created_at: from a date, a date-time, or '7d'/'12h'.

    ``name`` is the filter's option (since, until), for the message when ``text`` is no date.
    """
    try:
        ago = re.fullmatch(r"\s*(\d+)\s*([dhm])\s*", text)
        if ago:
            unit = {"d": "days", "h": "hours", "m": "minutes"}[ago[2]]
            moment = dt.datetime.now(dt.UTC) - dt.timedelta(**{unit: int(ago[1])})
        elif re.fullmatch(r"\d{4}-\d{2}-\d{2}", text.strip()):
            day = dt.date.fromisoformat(text.strip()) + dt.timedelta(days=1 if end_of_day else 0)
            moment = dt.datetime.combine(day, dt.time(), dt.UTC)
        else:
            moment = dt.datetime.fromisoformat(text.strip())
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=dt.UTC)
    except (ValueError, OverflowError):  # OverflowError: "99999999999d", before year 1
        raise ConfigError(
            name, f"cannot read {text!r} as a date; use 2026-11-21, 2026-11-21T14:00 or 7d / 12h ago"
        ) from None
    return moment.astimezone(dt.UTC).isoformat(timespec="seconds")


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction, taken at once (BEGIN IMMEDIATE) so writers queue, never deadlock.

    A failure, the commit's included, rolls it back, unless SQLite already did (as it may on a
    full disk): the error raised is always the one that ended it.
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
        raise


def migrate(db: sqlite3.Connection) -> None:
    """Bring the store to STORE_VERSION in one transaction (another process may have done it first)."""
    with transaction(db):
        version = db.execute("PRAGMA user_version").fetchone()[0]
        for target in range(version + 1, STORE_VERSION + 1):
            MIGRATIONS[target](db)
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        db.execute(f"PRAGMA user_version = {STORE_VERSION}")


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
        try:
            result = Result.from_json(text)
        except InvalidResult:
            continue  # its new columns stay empty; readers skip the run, saying why
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


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _create_v1, 2: _v1_to_v2}
