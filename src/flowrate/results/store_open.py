"""Opening the store's SQLite file: identity and version checks, WAL, migrations, read-only stores.

Nothing is written before the checks pass: a path that is no regular file (/dev/null), a file
that is not SQLite, an SQLite file of something else, a store that no longer reads (damaged), or a
store from a newer flowrate is refused with a message and left untouched. An empty file read by a
command that only reads is an empty store, and stays an empty file. What an SQLite failure while
opening means (a full disk, a lock held too long, damage) is said by store_errors.py; a store
another process holds locked is waited for as store_lock.py says.

A store this process cannot write (a read-only file, a read-only folder: SQLite keeps its
journal beside the store, or a read-only file system; found by trying, as SQLite would) is opened
read-only by commands that only read, through SQLite's ``mode=ro`` URI: no switch to WAL, no
migration, no ``-wal``/``-shm`` left behind. Where no ``-wal`` file is there (no writer holds
uncommitted pages), the file is also opened ``immutable``, which needs no ``-shm`` either: the
only way to read a WAL store in a folder nobody may create files in, or on a full disk, where a
command that only reads opens it so too. Commands that write are refused at once, with the
reason, before they spend any time measuring.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import stat
import tempfile
from pathlib import Path

from flowrate.errors import DISK_FULL_ERRNOS, ConfigError, DiskFull, FlowrateError, PathError
from flowrate.results.store_errors import store_failure
from flowrate.results.store_lock import POLL_MS, patiently
from flowrate.results.store_schema import APPLICATION_ID, STORE_VERSION, migrate

_NOT_PERMITTED = (errno.EACCES, errno.EPERM, errno.EROFS)


def read_only_reason(path: Path) -> str | None:
    """Why this process cannot write the store at ``path`` (or create it there); None if it can.

    Found by trying, as SQLite will: ``os.access`` answers for the real user, and can say yes where
    the process itself may not write (a thread without root's override) or no where it may. A
    folder where no file can be made because its disk is full raises DiskFull: the store is not
    read-only, it waits for room (SQLite makes its -shm file there even to read).
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
    if refused.errno in DISK_FULL_ERRNOS:
        raise store_failure(refused, path)
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
        db = sqlite3.connect(path, timeout=POLL_MS / 1000, isolation_level=None)
    except OSError as error:
        if error.errno in DISK_FULL_ERRNOS:
            raise store_failure(error, path) from None
        raise PathError(f"cannot create the results store {path}", error) from None
    except sqlite3.Error as error:
        raise store_failure(error, path, opening=True) from None
    try:
        version = patiently(path, lambda: _check_identity(db, path))
        patiently(path, lambda: _use_wal(db))
        db.execute("PRAGMA foreign_keys = ON")
        if version != STORE_VERSION:
            patiently(path, lambda: migrate(db))
    except sqlite3.Error as error:
        failure = store_failure(error, path, db, opening=True)
        db.close()
        if readonly and isinstance(failure, DiskFull):  # no room for a -shm: read the file as it is
            return _connect_read_only(path), True
        raise failure from None
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
            timeout=POLL_MS / 1000,
            isolation_level=None,
        )
    except sqlite3.Error as error:
        raise store_failure(error, path, opening=True) from None
    try:
        version = patiently(path, lambda: _check_identity(db, path))
        if version != STORE_VERSION:
            raise FlowrateError(
                f"the results store {path} is at store version {version} and read-only "
                f"({read_only_reason(path)}): make it writable once, so this flowrate can upgrade "
                f"it to version {STORE_VERSION}"
            )
    except sqlite3.Error as error:
        failure = store_failure(error, path, db, opening=True)
        db.close()
        raise failure from None
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
    with nothing written. An SQLite error is raised as it is, for store_failure to say."""
    try:  # one read transaction: a consistent view while another process creates the store
        db.execute("BEGIN")
        application_id = db.execute("PRAGMA application_id").fetchone()[0]
        version: int = db.execute("PRAGMA user_version").fetchone()[0]
        objects = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:  # a locked store is tried again: no transaction may stay open
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
        raise
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
    """Switch the file to WAL (it stays so). SQLite answers "database is locked" at once, without
    its busy wait, when the change meets another connection's lock (two processes opening a new
    store together, a sweep and a run): the caller tries it again (store_lock.patiently)."""
    mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    if str(mode).lower() != "wal":
        db.execute("PRAGMA journal_mode = WAL")
