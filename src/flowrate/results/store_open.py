"""Opening the store's SQLite file: identity and version checks, WAL, migrations, read-only stores.

Nothing is written before the checks pass: a file that is not SQLite, an SQLite file of something
else, or a store from a newer flowrate is refused with a message and left untouched.

A store this process cannot write (a read-only file, a read-only folder: SQLite keeps its
journal beside the store, or a read-only file system) is opened read-only by commands that only
read, through SQLite's ``mode=ro`` URI: no switch to WAL, no migration, no ``-wal``/``-shm`` left
behind. Where no ``-wal`` file is there (no writer holds uncommitted pages), the file is also
opened ``immutable``, which needs no ``-shm`` either: the only way to read a WAL store in a folder
nobody may create files in. Commands that write are refused at once, with the reason, before
they spend any time measuring.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from flowrate.errors import FlowrateError, PathError
from flowrate.results.store_schema import APPLICATION_ID, STORE_VERSION, migrate

BUSY_TIMEOUT_MS = 60_000


def read_only_reason(path: Path) -> str | None:
    """Why this process cannot write the store at ``path`` (or create it there); None if it can."""
    real = Path(os.path.realpath(path))  # SQLite keeps its journal beside the file a link names
    folder = real.parent
    if real.exists():
        if _read_only_file_system(real):
            return "it is on a read-only file system"
        if not os.access(real, os.W_OK):
            return "the file is not writable by this user"
    else:
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent  # the folders above are created on the first write
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"its folder {folder} is not writable by this user (SQLite keeps its journal there)"
    return None


def check_writable(path: Path) -> None:
    """Refuse, with the true reason, a store this process could not record into."""
    reason = read_only_reason(path)
    if reason is None:
        return
    if path.exists():
        raise FlowrateError(
            f"the results store {path} is read-only: {reason}; make it writable, or give another "
            "--store (or --no-store)"
        )
    raise FlowrateError(
        f"cannot create the results store {path}: {reason}; give another --store (or --no-store)"
    )


def connect(path: Path, *, readonly: bool) -> tuple[sqlite3.Connection, bool]:
    """An open, checked and migrated connection, and whether it is read-only.

    ``readonly``: the caller only reads; a store it cannot write opens read-only instead of
    being refused. Otherwise the store must be writable, and is created where there is none.
    """
    if readonly and read_only_reason(path) is not None:
        return _connect_read_only(path), True
    check_writable(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except OSError as error:
        raise PathError(f"cannot create the results store {path}", error) from None
    except sqlite3.Error as error:
        raise FlowrateError(f"cannot open the results store {path}: {error}") from None
    try:
        version = _check_identity(db, path)
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _use_wal(db)
        db.execute("PRAGMA foreign_keys = ON")
        if version != STORE_VERSION:
            migrate(db)
    except BaseException:
        db.close()
        raise
    return db, False


def _connect_read_only(path: Path) -> sqlite3.Connection:
    real = Path(os.path.realpath(path))
    immutable = "" if Path(f"{real}-wal").exists() else "&immutable=1"
    try:
        db = sqlite3.connect(
            f"{real.as_uri()}?mode=ro{immutable}",
            uri=True,
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,
        )
    except sqlite3.Error as error:
        raise FlowrateError(f"cannot open the read-only results store {path}: {error}") from None
    try:
        version = _check_identity(db, path)
        if version != STORE_VERSION:
            raise FlowrateError(
                f"the results store {path} is at store version {version} and read-only "
                f"({read_only_reason(path)}): make it writable once, so this flowrate can upgrade "
                f"it to version {STORE_VERSION}"
            )
    except BaseException:
        db.close()
        raise
    return db


def _read_only_file_system(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _check_identity(db: sqlite3.Connection, path: Path) -> int:
    """The store's version; anything but an empty file or a store this flowrate reads is refused,
    with nothing written."""
    try:  # one read transaction: a consistent view while another process creates the store
        db.execute("BEGIN")
        application_id = db.execute("PRAGMA application_id").fetchone()[0]
        version: int = db.execute("PRAGMA user_version").fetchone()[0]
        objects = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        db.execute("COMMIT")
    except sqlite3.DatabaseError as error:
        raise FlowrateError(
            f"{path} is not a flowrate results store ({error}); it was left untouched: "
            "give another --store, or move the file aside"
        ) from None
    if application_id != APPLICATION_ID and (objects or version):
        raise FlowrateError(
            f"{path} is an SQLite database but not a flowrate results store; it was left "
            "untouched: give another --store"
        )
    if version > STORE_VERSION:
        raise FlowrateError(
            f"the results store {path} was written by a newer flowrate (store version "
            f"{version}; this flowrate reads up to {STORE_VERSION}); it was left untouched: "
            "upgrade flowrate to use it"
        )
    return version


def _use_wal(db: sqlite3.Connection) -> None:
    """Switch the file to WAL (it stays so); retry while another process holds a lock.

    SQLite answers "database is locked" at once, without waiting on the busy timeout, when a
    journal-mode change meets another connection's lock: two processes opening a new store
    together (a sweep and a run) would otherwise fail.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            mode = db.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal":
                db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) and "busy" not in str(error):
                raise
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
