"""Waiting for a store another process is writing to: said, bounded, and stopped by Ctrl-C.

SQLite's own busy wait runs inside one C call, where Python sees no Ctrl-C until the call gives
up. So every store connection waits only POLL_MS at a time (``busy_timeout``), and ``patiently``
tries an operation again while the store is locked, up to LIMIT_S in all. Between tries Python
runs: Ctrl-C stops the wait within POLL_MS. A wait longer than NOTICE_S is said once, as a
StoreWaitWarning (the CLI prints it as one `warning:` line), so a command that seems stuck says
what it is waiting for.

Each operation retried is one SQLite transaction (a write) or a read: a try that found the store
locked changed nothing, so trying it again is safe.
"""

from __future__ import annotations

import sqlite3
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from flowrate.results.store_errors import is_locked

POLL_MS = 100  # SQLite's busy timeout per try: the longest Ctrl-C goes unseen
NOTICE_S = 2.0  # a wait this long is said
LIMIT_S = 60.0  # then the store counts as stuck, and the command fails saying so
_PAUSE_S = 0.02  # between tries (some lock conflicts fail at once, without SQLite's wait)

_T = TypeVar("_T")


class StoreWaitWarning(UserWarning):
    """A command is waiting for a store that another process holds locked."""


def patiently(
    path: Path,
    attempt: Callable[[], _T],
    *,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], None] = time.sleep,
) -> _T:
    """``attempt()``, tried again while the store at ``path`` is locked, for up to LIMIT_S; the
    last "database is locked" error is raised after that. Any other error is raised at once."""
    start = clock()
    said = False
    while True:
        try:
            return attempt()
        except sqlite3.OperationalError as error:
            if not is_locked(error):
                raise
            waited = clock() - start
            if waited >= LIMIT_S:
                raise
            if not said and waited >= NOTICE_S:
                warnings.warn(
                    StoreWaitWarning(
                        f"waiting for the results store {path}: another process is writing to it "
                        f"(for up to {LIMIT_S:g} s; Ctrl-C stops)"
                    ),
                    stacklevel=2,
                )
                said = True
        pause(_PAUSE_S)
