"""What a failure of the store's SQLite file means, said in one line with the exit code it earns.

Every sqlite3 error (or OSError) met while opening or using the store comes to ``store_failure``,
which tells apart, in this order:

- a full disk: SQLITE_FULL ("database or disk is full"), ENOSPC or a used-up quota, or an I/O
  error (SQLite says "disk I/O error" when it cannot grow the store's -shm or -wal file) or a
  file it cannot open while the store's file system has (almost) no room or no inodes left.
  Exit 1: the system failed. SQLite rolled the transaction back, so the store is as it was and
  nothing already recorded is lost; the empty -wal and torn -shm SQLite began beside it and could
  not grow are removed (``remove_stillborn_wal``), so nothing is left beside it either;
- a write lock another process held for the whole wait (store_lock.py): exit 1;
- a store made read-only while open: exit 2;
- a file that is not a store (it does not carry the store's mark): exit 2;
- a damaged store: SQLite's integrity check fails on it, or it no longer opens as a database.
  Exit 2, with the advice to move it aside. That advice is given only when the check confirms it;
- anything else (an I/O error on a store that still reads intact): exit 1, the store left as it
  was, with SQLite's reason.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from flowrate.errors import DISK_FULL_ERRNOS, DiskFull, FlowrateError, RunFailed
from flowrate.results.store_schema import APPLICATION_ID

# An I/O error is put down to a full disk when less than this is free on the store's file system:
# SQLite grows a store's -shm file 32 KiB at a time and its -wal a page (4 KiB) at a time.
NEARLY_FULL_BYTES = 1 << 20

# The first region of a WAL index (-shm) that SQLite maps: a connection reading or writing the store
# has grown its -shm file to this at least.
SHM_REGION_BYTES = 32 << 10

# The most of the integrity check's first finding a message quotes.
_FINDING_CHARS = 160

_LOCKED_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
_DAMAGE_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
_IO_CODES = (sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN)


def primary_code(error: sqlite3.Error) -> int | None:
    """SQLite's primary result code of ``error`` (SQLITE_IOERR for SQLITE_IOERR_SHMSIZE); None
    for an error SQLite did not report."""
    code = getattr(error, "sqlite_errorcode", None)
    return None if code is None else int(code) & 0xFF


def is_locked(error: sqlite3.Error) -> bool:
    """Whether ``error`` says another connection holds a lock the statement needed."""
    code = primary_code(error)
    if code is not None:
        return code in _LOCKED_CODES
    return "database is locked" in str(error) or "database table is locked" in str(error)


def is_disk_full(error: sqlite3.Error | OSError, path: Path) -> bool:
    """Whether ``error`` comes from a full disk under the store at ``path`` (see the module's
    docstring: SQLite's own FULL code, the system's ENOSPC, or an I/O error with no room left)."""
    if isinstance(error, OSError):
        return error.errno in DISK_FULL_ERRNOS
    code = primary_code(error)
    if code == sqlite3.SQLITE_FULL or "database or disk is full" in str(error):
        return True
    return code in _IO_CODES and no_room_left(path)


def no_room_left(path: Path) -> bool:
    """Whether the file system holding ``path`` has (almost) no free space or no free inodes for
    this process (root may use the blocks reserved for it)."""
    try:
        found = os.statvfs(Path(os.path.realpath(path)).parent)
    except OSError:
        return False
    blocks = found.f_bfree if os.geteuid() == 0 else found.f_bavail
    no_inodes = found.f_files > 0 and found.f_favail == 0
    return blocks * found.f_frsize < NEARLY_FULL_BYTES or no_inodes


def remove_stillborn_wal(path: Path) -> None:
    """Remove the -wal and -shm files SQLite began beside the store at ``path`` but could not grow
    on a full disk, so that nothing is left beside an unchanged store: only an empty -wal (it holds
    no page) beside a -shm shorter than its first region (no connection can have mapped it, so none
    is using either). Anything else is left to SQLite."""
    wal, shm = Path(f"{path}-wal"), Path(f"{path}-shm")
    try:
        if wal.stat().st_size != 0 or shm.stat().st_size >= SHM_REGION_BYTES:
            return
        wal.unlink()
        shm.unlink()
    except OSError:
        return


def marked_as_store(path: Path) -> bool:
    """Whether the file's SQLite header carries the store's application id (offset 68): a store
    that no longer reads is damaged, not someone else's file."""
    try:
        with open(path, "rb") as file:
            header = file.read(100)
    except OSError:
        return False
    return header.startswith(b"SQLite format 3\0") and header[68:72] == APPLICATION_ID.to_bytes(4, "big")


def integrity(db: sqlite3.Connection | None) -> str | None:
    """SQLite's integrity check of the store ``db`` is connected to: "ok" when it reads intact,
    else its first finding (or the error that stops the file reading as a database); None when
    the check cannot tell (no connection, an I/O error, a lock held throughout).

    The store's own connection runs it: a second one would leave -wal and -shm files beside a
    store that no writer will come back to clean up.
    """
    if db is None:
        return None
    try:
        findings = [str(row[0]) for row in db.execute("PRAGMA integrity_check")]
    except sqlite3.Error as error:
        return str(error) if primary_code(error) in _DAMAGE_CODES else None
    if not findings:
        return None
    return " ".join(findings[0].split())[:_FINDING_CHARS]  # one line, however SQLite words it


def store_failure(
    error: sqlite3.Error | OSError,
    path: Path,
    db: sqlite3.Connection | None = None,
    *,
    opening: bool = False,
) -> FlowrateError:
    """The one-line error that says what ``error``, met using the store at ``path`` through the
    connection ``db`` (None where none opened), means.

    ``opening``: met while checking what the file is, before anything was written to it: a file
    without the store's mark is then someone else's file, not a damaged store.
    """
    if is_disk_full(error, path):
        remove_stillborn_wal(path)
        return DiskFull(
            f"the disk holding the results store {path} is full ({_reason(error)}); the store is "
            "unchanged and nothing recorded in it was lost: free some space, or give another --store"
        )
    if isinstance(error, OSError):
        return RunFailed(f"the results store {path} could not be used: {_reason(error)}")
    if is_locked(error):
        return RunFailed(
            f"the results store {path} stayed locked by another process ({error}); nothing was "
            "written to it: try again once that process is done, or give another --store"
        )
    if primary_code(error) == sqlite3.SQLITE_READONLY or "readonly" in str(error):
        return FlowrateError(
            f"the results store {path} is read-only ({error}); make it writable, or give another --store"
        )
    if opening and not marked_as_store(path) and _has_content(path):
        return FlowrateError(
            f"{path} is not a flowrate results store ({error}); it was left untouched: "
            "give another --store, or move the file aside"
        )
    checked = integrity(db)
    if checked is not None and checked != "ok":
        found = str(error) if checked == str(error) else f"{error}; SQLite's integrity check: {checked}"
        return FlowrateError(
            f"the results store {path} is damaged ({found}); it was left untouched: move it aside "
            "(a copy may still yield runs to `sqlite3 .recover`) or give another --store"
        )
    intact = " still reads intact (SQLite's integrity check passes) and" if checked == "ok" else ""
    return RunFailed(
        f"the results store {path} could not be used ({error}); it{intact} was left as it was: "
        "try again, or give another --store"
    )


def _reason(error: sqlite3.Error | OSError) -> str:
    if isinstance(error, OSError):
        return error.strerror or str(error)
    return str(error)


def _has_content(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False
