"""What a failure of the results store means (store_errors.py) and how a locked store is waited
for (store_lock.py): real SQLite errors where SQLite can be made to give them."""

from __future__ import annotations

import errno
import hashlib
import os
import sqlite3
import warnings
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest

from factories import make_result
from flowrate.errors import EXIT_BAD_INPUT, EXIT_FAILED, DiskFull, FlowrateError
from flowrate.results import store_errors, store_lock
from flowrate.results.store import Store
from flowrate.results.store_errors import integrity, store_failure
from flowrate.results.store_lock import StoreWaitWarning, patiently

RUN_A, RUN_B = "aaaa00000001", "bbbb00000002"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store holding one run, closed (its WAL folded into the file)."""
    path = tmp_path / "s.db"
    with Store(path) as opened:
        opened.add(make_result(run_id=RUN_A))
    return path


def damaged(path: Path) -> Path:
    """The store with pages of its runs table scribbled over (its header and schema intact)."""
    with Store(path) as opened:
        for _ in range(30):
            opened.add(make_result(interval_rates=[100.0] * 50))
    data = bytearray(path.read_bytes())
    data[3 * 4096 : 6 * 4096] = b"\x13" * (3 * 4096)
    path.write_bytes(bytes(data))
    return path


def no_room(monkeypatch: pytest.MonkeyPatch, full: bool) -> None:
    """The store's file system has no free blocks (``full``) or plenty."""
    real = os.statvfs

    def statvfs(path: str | os.PathLike[str]) -> os.statvfs_result:
        found = list(real(path))
        if full:
            found[3] = found[4] = 0  # f_bfree, f_bavail
        return os.statvfs_result(found)

    monkeypatch.setattr(store_errors.os, "statvfs", statvfs)


def io_error() -> sqlite3.OperationalError:
    """What SQLite raises when it cannot grow the store's -shm file (a full tmpfs gives it)."""
    error = sqlite3.OperationalError("disk I/O error")
    error.sqlite_errorcode = sqlite3.SQLITE_IOERR_SHMSIZE  # type: ignore[attr-defined]
    error.sqlite_errorname = "SQLITE_IOERR_SHMSIZE"  # type: ignore[attr-defined]
    return error


# --- a full disk -----------------------------------------------------------------------------


def test_a_store_that_reaches_its_size_limit_is_a_full_disk_and_keeps_what_it_held(store: Path) -> None:
    """SQLite's own SQLITE_FULL, raised by a real write (the page limit stands in for the disk)."""
    before = digest(store)
    with Store(store) as opened:
        opened._db.execute(f"PRAGMA max_page_count = {opened._db.execute('PRAGMA page_count').fetchone()[0]}")
        with pytest.raises(DiskFull) as raised:
            opened.add(make_result(run_id=RUN_B, interval_rates=[1.0] * 20_000))
    message = str(raised.value)
    assert raised.value.exit_code == EXIT_FAILED
    assert f"the disk holding the results store {store} is full (database or disk is full)" in message
    assert "nothing recorded in it was lost" in message and "move it aside" not in message
    assert digest(store) == before
    with Store(store, create=False) as opened:
        assert [run.run_id for run in opened.runs()] == [RUN_A]


def test_the_systems_no_space_left_is_a_full_disk(store: Path) -> None:
    failure = store_failure(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), store)
    assert isinstance(failure, DiskFull) and "is full (No space left on device)" in str(failure)


def test_an_io_error_while_the_disk_has_no_room_is_a_full_disk(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_room(monkeypatch, full=True)
    failure = store_failure(io_error(), store, opening=True)
    assert isinstance(failure, DiskFull)
    assert f"the disk holding the results store {store} is full (disk I/O error)" in str(failure)
    assert "damaged" not in str(failure) and "move it aside" not in str(failure)


def test_an_io_error_with_room_left_on_an_intact_store_fails_the_run_without_blaming_the_file(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_room(monkeypatch, full=False)
    with closing(sqlite3.connect(store)) as db:
        failure = store_failure(io_error(), store, db)
    assert not isinstance(failure, DiskFull) and failure.exit_code == EXIT_FAILED
    assert "still reads intact (SQLite's integrity check passes)" in str(failure)
    assert "damaged" not in str(failure) and "move it aside" not in str(failure)
    unknown = store_failure(io_error(), store)  # no connection: no check, no claim either way
    assert "could not be used (disk I/O error)" in str(unknown) and "intact" not in str(unknown)
    assert "move it aside" not in str(unknown)


# --- a damaged store ---------------------------------------------------------------------------


def test_a_damaged_store_is_bad_input_with_the_advice_to_move_it_aside_even_on_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = damaged(tmp_path / "s.db")
    no_room(monkeypatch, full=True)  # SQLite's CORRUPT is damage, however full the disk
    before = digest(path)
    with pytest.raises(FlowrateError) as raised:  # noqa: SIM117
        with Store(path) as opened:
            opened.runs()
    assert raised.value.exit_code == EXIT_BAD_INPUT
    assert f"the results store {path} is damaged (database disk image is malformed)" in str(raised.value)
    assert "move it aside" in str(raised.value)
    assert digest(path) == before


def test_the_integrity_check_tells_intact_damaged_and_unknown_apart(store: Path, tmp_path: Path) -> None:
    with closing(sqlite3.connect(store)) as db:
        assert integrity(db) == "ok"
    with closing(sqlite3.connect(damaged(tmp_path / "d.db"))) as db:
        assert integrity(db) == "database disk image is malformed"
    assert integrity(None) is None  # cannot tell: no advice to move anything


# --- a locked store ----------------------------------------------------------------------------


@pytest.fixture
def holder(store: Path) -> Iterator[sqlite3.Connection]:
    """Another connection holding the store's write lock, as a process recording a run does."""
    db = sqlite3.connect(store, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    yield db
    db.execute("ROLLBACK")
    db.close()


def test_a_store_locked_past_the_limit_says_so_after_saying_it_waits(
    store: Path, holder: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_lock, "NOTICE_S", 0.0)
    monkeypatch.setattr(store_lock, "LIMIT_S", 0.3)
    with Store(store) as opened, warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with pytest.raises(FlowrateError) as raised:
            opened.add(make_result(run_id=RUN_B))
    assert [str(w.message) for w in said] == [
        f"waiting for the results store {store}: another process is writing to it "
        "(for up to 0.3 s; Ctrl-C stops)"
    ]
    assert said[0].category is StoreWaitWarning
    assert raised.value.exit_code == EXIT_FAILED
    assert f"the results store {store} stayed locked by another process (database is locked)" in str(
        raised.value
    )
    assert "move it aside" not in str(raised.value)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def pause(self, seconds: float) -> None:
        self.now += 0.5


def locked() -> sqlite3.OperationalError:
    error = sqlite3.OperationalError("database is locked")
    error.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
    return error


def failing(error: Exception) -> Callable[[], None]:
    def attempt() -> None:
        raise error

    return attempt


def test_the_wait_tries_again_until_the_lock_is_gone_and_says_so_once() -> None:
    clock = FakeClock()
    tries: list[float] = []

    def attempt() -> str:
        tries.append(clock.now)
        if clock.now < 5.0:
            raise locked()
        return "done"

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert patiently(Path("s.db"), attempt, clock=clock, pause=clock.pause) == "done"
    assert tries == [0.5 * i for i in range(11)]
    assert len(said) == 1 and "waiting for the results store s.db" in str(said[0].message)


def test_the_wait_ends_at_its_limit_with_the_lock_error_and_other_errors_end_it_at_once() -> None:
    clock = FakeClock()
    with pytest.raises(sqlite3.OperationalError, match="locked"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        patiently(Path("s.db"), failing(locked()), clock=clock, pause=clock.pause)
    assert clock.now == store_lock.LIMIT_S
    clock = FakeClock()
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        patiently(Path("s.db"), failing(io_error()), clock=clock, pause=clock.pause)
    assert clock.now == 0.0


@pytest.mark.parametrize(
    ("wal_bytes", "shm_bytes", "removed"),
    [
        (0, 3, True),  # what SQLite leaves on a full disk: an empty -wal, a torn -shm
        (0, store_errors.SHM_REGION_BYTES, False),  # a -shm some connection may have mapped
        (4096, 3, False),  # a -wal holding a page: SQLite's to checkpoint
    ],
)
def test_only_a_stillborn_wal_is_removed_from_beside_a_store(
    tmp_path: Path, wal_bytes: int, shm_bytes: int, removed: bool
) -> None:
    store = tmp_path / "flowrate.db"
    store.write_bytes(b"store")
    wal, shm = tmp_path / "flowrate.db-wal", tmp_path / "flowrate.db-shm"
    wal.write_bytes(b"w" * wal_bytes)
    shm.write_bytes(b"s" * shm_bytes)
    store_errors.remove_stillborn_wal(store)
    assert (wal.exists(), shm.exists()) == ((False, False) if removed else (True, True))
    assert store.read_bytes() == b"store"
