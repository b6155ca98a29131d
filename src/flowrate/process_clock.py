"""When the command started, on time.monotonic()'s scale: what a --budget counts from, so the
whole command (the interpreter's start and the imports included) ends within it.

``mark_command_start`` is called once by the console entry point: with ``fresh`` (flowrate was
started as a program) the command began when this process did; otherwise (flowrate's command line
called from inside a longer-lived process: a test, a notebook) it begins at the call.
"""

from __future__ import annotations

import time

_STARTED: list[float] = []  # the mark, once made


def process_start() -> float:
    """This process's start on time.monotonic()'s scale (now, where the system will not say)."""
    import psutil

    try:
        return time.monotonic() - max(0.0, time.time() - psutil.Process().create_time())
    except psutil.Error:
        return time.monotonic()


def mark_command_start(fresh: bool) -> None:
    """Note when this command started: at the process's start when ``fresh``, else now."""
    _STARTED[:] = [process_start() if fresh else time.monotonic()]


def command_start() -> float:
    """When this command started (mark_command_start), or now where nothing marked it."""
    return _STARTED[0] if _STARTED else time.monotonic()
