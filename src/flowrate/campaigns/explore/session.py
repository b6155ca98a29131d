"""One session per exploration at a time, and a study storage whose tables are created once.

Why a lock and not coordination through the study: two sessions of one exploration each ask
their sampler for points and count the budget from what they have told the study, so run
together they measure the same points and both spend the budget. A session therefore holds an
exclusive lock tied to its study for as long as it runs, and a second session of the same study
is refused at once, in one line (exit 2); once the first has ended, the same command resumes the
study. Sessions of different studies on one store run side by side.

The lock is a POSIX record lock (fcntl) on one byte of ``<store stem>.explore.lock``, the byte
chosen by a hash of the study's name. The kernel releases it when its process ends, however it
ends (a kill included), so a dead session never blocks the next one, and a process forked from the
session does not inherit it. Byte 0 of the same file is held while the storage is opened: Optuna
creates its tables when a storage first opens, with no guard against a second process creating
them at the same moment (`table ... already exists`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from flowrate.errors import FlowrateError, PathError

if TYPE_CHECKING:
    from optuna.storages import BaseStorage

_CREATING = 0  # the byte held while the storage's tables are created
_BUSY = (errno.EACCES, errno.EAGAIN)  # what F_SETLK answers when another process holds the byte


def study_storage(store: Path) -> str:
    """The Optuna storage URL of a store's explorations: an SQLite file beside it."""
    return f"sqlite:///{store.with_name(store.stem + '.explore.db').resolve()}"


def lock_path(store: Path) -> Path:
    """The file whose bytes lock a store's explorations (module docstring)."""
    return store.with_name(store.stem + ".explore.lock")


def study_byte(study: str) -> int:
    """The byte of the lock file that ``study``'s session holds: 1 to 2**31 - 1, by its name's hash."""
    digest = hashlib.sha256(study.encode()).digest()
    return 1 + int.from_bytes(digest[:4], "big") % (2**31 - 1)


@contextlib.contextmanager
def exclusive_session(store: Path, study: str) -> Iterator[BaseStorage]:
    """The study storage of ``store``'s explorations, opened while this process holds
    ``study``'s session lock, which it keeps until the block ends; FlowrateError (exit 2) when
    another session of the study holds it."""
    path = lock_path(store)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as error:
        raise PathError(f"cannot open {path} (the lock of the store's explorations)", error) from None
    try:
        _hold(fd, study, store)
        yield _open_storage(fd, study_storage(store))
    finally:
        os.close(fd)  # releases every lock this process holds on the file


def _hold(fd: int, study: str, store: Path) -> None:
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, study_byte(study))
    except OSError as error:
        if error.errno not in _BUSY:
            raise
        raise FlowrateError(
            f"the exploration {study} is running in another session on {store}; wait for it to end "
            "(the same command then resumes it) or explore under another --name"
        ) from None


def _open_storage(fd: int, url: str) -> BaseStorage:
    """Optuna's storage at ``url``, opened (its tables created where missing) under byte 0."""
    import optuna

    fcntl.lockf(fd, fcntl.LOCK_EX, 1, _CREATING)
    try:
        return optuna.storages.RDBStorage(url)
    finally:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, _CREATING)
