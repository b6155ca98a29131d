"""Opening the store's SQLite file: identity and version checks, WAL, migrations, read-only stores.

Nothing is written before the checks pass: a path that is no regular file (/dev/null), a file
that is not SQLite, an SQLite file of something else, a store that no longer reads (damaged), or a
store from a newer flowrate is refused with a message and left untouched. An empty file read by a
command that only reads is an empty store, and stays an empty file.

A store this process cannot write (a read-only file, a read-only folder: SQLite keeps its
journal beside the store, or a read-only file system; found by trying, as SQLite would) is opened
read-only by commands that only read, through SQLite's ``mode=ro`` URI: no switch to WAL, no
migration, no ``-wal``/``-shm`` left behind. Where no ``-wal`` file is there (no writer holds
uncommitted pages), the file is also opened ``immutable``, which needs no ``-shm`` either: the
only way to read a WAL store in a folder nobody may create files in. Commands that write are
refused at once, with the reason, before they spend any time measuring.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import tempfile
import time
from pathlib import Path

from flowrate.errors import ConfigError, FlowrateError, PathError
from flowrate.results.store_schema import APPLICATION_ID, STORE_VERSION, migrate

BUSY_TIMEOUT_MS = 60_000
_NOT_PERMITTED = (errno.EACCES, errno.EPERM, errno.EROFS)


def read_only_reason(path: Path) -> str | None:
    """Why this process cannot write the store at ``path`` (or create it there); None if it can.

    Found by trying, as SQLite will: ``os.access`` answers for the real user, and can say yes where
    the process itself may not write (a thread without root's override) or no where it may.
    """
    real = Path(os.path.realpath(path))  # SQLite keeps its journal beside the file a link names
    folder = real.parent
    if real.exists():
        if _read_only_file_system(real):
            return "it is on a read-only file system"
        if not _opens_for_writing(real):
            return "the file is not writable by this user"
    else:
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent  # the folders above are created on the first write
    refused = _create_refused(folder)
    if refused is None:
        return None
    if refused.errno in _NOT_PERMITTED:
        return f"its folder {folder} is not writable by this user (SQLite keeps its journal there)"
    if refused.errno == errno.ENOTDIR:
        return f"{folder} is not a folder"
    return f"no file can be made in its folder {folder} ({refused.strerror})"


def _opens_for_writing(file: Path) -> bool:
    """Whether the file opens for writing (nothing is written: no truncation, no change)."""
    try:
        os.close(os.open(file, os.O_WRONLY | os.O_NONBLOCK))
    except OSError as error:
        return error.errno not in _NOT_PERMITTED
    return True


def _create_refused(folder: Path) -> OSError | None:
    """Why no file can be made in ``folder``, as SQLite makes its -wal, -shm and -journal files
    (one is made there and removed at once); None when one can."""
    try:
        handle, name = tempfile.mkstemp(dir=folder, prefix=".flowrate-probe-")
    except OSError as error:
        return error
    os.close(handle)
    os.unlink(name)
    return None


def check_regular(path: Path) -> None:
    """Refuse a store path that names something other than a file (a device, a FIFO): SQLite would
    fail on it with a disk I/O error and leave a journal beside it."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # nothing there yet (or unreachable): opening it says why
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file (a device, FIFO or socket)"
        raise ConfigError("store", f"{path} is {kind}, not a results store: give a file's path")


def check_writable(path: Path) -> None:
    """Refuse, with the true reason, a store this process could not record into."""
    check_regular(path)
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
    check_regular(path)
    if readonly and _is_empty(path):
        return _empty_store(), True  # an empty file reads as an empty store, and stays empty
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


def _is_empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except OSError:
        return False


def _empty_store() -> sqlite3.Connection:
    """A store with no runs, in memory: what an empty file holds, read without writing to it."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    migrate(db)
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
        if _marked_as_store(path):
            raise FlowrateError(
                f"the results store {path} is damaged ({error}); it was left untouched: move it "
                "aside (a copy may still yield runs to `sqlite3 .recover`) or give another --store"
            ) from None
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


def _marked_as_store(path: Path) -> bool:
    """Whether the file's SQLite header carries the store's application id (offset 68): a store
    that no longer reads is damaged, not someone else's file."""
    try:
        with open(path, "rb") as file:
            header = file.read(100)
    except OSError:
        return False
    return header.startswith(b"SQLite format 3\0") and header[68:72] == APPLICATION_ID.to_bytes(4, "big")


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
