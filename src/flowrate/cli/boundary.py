"""The CLI's one boundary: how a command's failure reaches the user, as one line and an exit code.

- a ``FlowrateError``: `error: <message>` and its exit code (2 bad input, 1 the run failed);
  click's usage errors are bad input; a ``ConfigError`` names the flag;
- an ``OSError``: one line naming the path (exit 2 when the path is the user's mistake, 1 when the
  system failed, as a full disk); a reader that went away (`flowrate runs --json | head -1`)
  ends the command quietly, as Unix tools do;
- an interrupt (Ctrl-C): 130, `interrupted`; SIGTERM (`kill`'s or a scheduler's stop) takes the
  same path, raised as ``Terminated``, a KeyboardInterrupt, so whatever cleans up after Ctrl-C (a
  sweep's record of what was done, a run's process ended, a store transaction rolled back) cleans
  up after it too, and ends with 143, `terminated`, as a shell reports a process SIGTERM ended;
- an exception, or a ``sys.exit()``, raised inside a user's problem file: one line naming the
  user's function, file and line (flowrate/problems/user.py), exit 1 — never a pass;
- anything else is a bug in flowrate and keeps its traceback.

flowrate's own warnings, raised below the CLI (a run in the store that cannot be read is skipped),
are said here too, as one `warning:` line each.

Under torchrun every rank gets here: rank 0 alone prints (the others' lines would repeat it), and
a failing rank leaves at once with its code, so torchrun's summary stays short.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, NoReturn, TextIO

import click

from flowrate.cli import console
from flowrate.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_READER_GONE,
    ConfigError,
    FlowrateError,
    PathError,
    os_error_exit_code,
)

# Seconds a failing rank other than 0 waits before it leaves (see _leave).
RANK_GRACE_S = 3.0
# Seconds after an interrupt was lost in a finalizer that its signal is sent again (_raise_again).
RESEND_S = 0.05
# What a shell reports for a process that SIGTERM ended: 128 + the signal's number.
EXIT_TERMINATED = 128 + signal.SIGTERM


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, as the CLI raises it: KeyboardInterrupt itself but for one thing. CPython remembers
    a KeyboardInterrupt of that exact class that escaped code which C ran through PyRun_* (an
    import torch makes, say) and, once the main module has left with its exit code, ends the
    process by SIGINT instead; it lets a subclass go."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread where it was when the signal came, as Ctrl-C raises
    KeyboardInterrupt: every `except KeyboardInterrupt` cleanup runs for it too."""


class _Sigterm:
    """Whether a SIGTERM came during the command under way (a command that catches the
    interrupt and raises a KeyboardInterrupt of its own, or click's Abort, still ends with 143)."""

    received = False


@contextlib.contextmanager
def signals_as_interrupts() -> Iterator[None]:
    """While the block runs, SIGINT raises Interrupted and SIGTERM raises Terminated in the main
    thread; the handlers before are put back after it. Each signal is taken only where Python's
    own handling is in place (SIGINT's default_int_handler, SIGTERM's default action), so one a
    caller ignores or handles stays as it is; off the main thread nothing changes. The first
    SIGTERM raises, later ones are ignored, so that the cleanup it started finishes; one lost in
    a finalizer is raised again (_raise_again)."""
    _Sigterm.received = False
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    ours: dict[int, Callable[[int, FrameType | None], None]] = {}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        ours[signal.SIGINT] = _raise_interrupted
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        ours[signal.SIGTERM] = _raise_terminated
    before = {signum: signal.signal(signum, handler) for signum, handler in ours.items()}
    unraisable = sys.unraisablehook
    sys.unraisablehook = functools.partial(_raise_again, unraisable)
    try:
        yield
    finally:
        sys.unraisablehook = unraisable
        for signum, handler in before.items():
            signal.signal(signum, handler)


def _raise_again(others: Callable[[Any], object], unraisable: Any) -> None:
    """An interrupt raised while a finalizer ran (a DataLoader iterator's __del__ that joins its
    workers, say) is lost there: Python would print it and go on with the command. Send the
    signal again instead, from a thread a moment later (sent here, it would be raised in this
    hook, and lost as well), to be raised where the command can take it; pass on anything else."""
    if isinstance(unraisable.exc_value, Terminated):
        _Sigterm.received = False
        signum = signal.SIGTERM
    elif isinstance(unraisable.exc_value, Interrupted):
        signum = signal.SIGINT
    else:
        others(unraisable)
        return
    again = threading.Timer(RESEND_S, os.kill, (os.getpid(), signum))
    again.daemon = True
    again.start()


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise Interrupted


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    if not _Sigterm.received:
        _Sigterm.received = True
        raise Terminated


def answer(command: Callable[[], object]) -> NoReturn:
    """Run ``command``; leave with its exit code (an int it returns, as click's main returns
    ctx.exit's code), having said in one line why it failed."""
    try:
        with _warnings_as_lines():
            returned = command()
        code = returned if isinstance(returned, int) else EXIT_OK
    except click.exceptions.Exit as done:
        code = done.exit_code
    except BaseException as error:  # every kind is answered below; a bug is raised again
        code = _answer(error)
    _leave(code)


@contextlib.contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """flowrate's own warnings (a store's run that cannot be read is skipped) as one `warning:`
    line each, said once however often it is raised; other libraries' keep Python's format."""
    said: set[str] = set()
    with warnings.catch_warnings():
        others = warnings.showwarning

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            if not category.__module__.startswith("flowrate."):
                others(message, category, filename, lineno, file, line)
            elif str(message) not in said and _torchrun_rank() in (None, 0):
                said.add(str(message))
                console.warn(str(message))

        warnings.showwarning = show
        yield


def flag(field: str) -> str:
    """The flag of a RunConfig field (duration_s's is --duration-s unless renamed), or a flag
    spelt as the user typed it (`-O nosuch`, `--sample-shape`)."""
    return field if field.startswith("-") else "--" + field.replace("_", "-")


def _answer(error: BaseException) -> int:
    """Say why ``error`` ended the command and return the exit code; raise again what is a bug."""
    if isinstance(error, KeyboardInterrupt | click.Abort):
        if _Sigterm.received or isinstance(error, Terminated):
            _say("terminated")
            return EXIT_TERMINATED
        _say("interrupted")
        return EXIT_INTERRUPTED
    if isinstance(error, click.UsageError):
        command = error.ctx.command_path if error.ctx else "flowrate"
        _say(f"{error.format_message()} (see `{command} --help`)")
        return EXIT_BAD_INPUT
    if isinstance(error, ConfigError):
        _say(f"{flag(error.field)}: {error.message}")
        return error.exit_code
    if isinstance(error, PathError):
        return _path_error(str(error), error.exit_code, error.stdout)
    if isinstance(error, FlowrateError):
        _say(str(error))
        return error.exit_code
    if isinstance(error, click.ClickException):
        _say(error.format_message())
        return error.exit_code
    in_user_code = _user_failure(error)
    if in_user_code is not None:
        _say(in_user_code)
        return EXIT_FAILED
    if isinstance(error, OSError):
        where = " -> ".join(str(name) for name in (error.filename, error.filename2) if name is not None)
        return _path_error(
            f"{where or type(error).__name__}: {error.strerror or error}", os_error_exit_code(error)
        )
    raise error


def _user_failure(error: BaseException) -> str | None:
    """One line for an exception or exit raised in a user's problem file, or in a library model's
    own code (timm, torchvision, transformers) while it ran; None when neither was."""
    if "flowrate.problems.user" in sys.modules:  # a user file was loaded: it may be one
        from flowrate.problems.user import describe_failure

        in_user_file = describe_failure(error)
        if in_user_file is not None:
            return in_user_file
    if "flowrate.problems.sources.loader" in sys.modules:  # a library model was built
        from flowrate.problems.sources.loader import describe_step_failure

        return describe_step_failure(error)
    return None


def _path_error(message: str, code: int, stdout: bool = False) -> int:
    if stdout or code == EXIT_READER_GONE:
        _silence_stdout()
    if code != EXIT_READER_GONE:  # a reader that went away wants no more words: leave quietly
        _say(message)
    return code


def _silence_stdout() -> None:
    """Point the process's stdout at /dev/null, as Python's documentation advises after EPIPE: what
    is still buffered goes there at exit, instead of a second failure ('Exception ignored')."""
    stdout = sys.__stdout__
    if stdout is None or sys.stdout is not stdout:  # replaced (a test's capture): not ours to close
        return
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stdout.fileno())
        os.close(devnull)


def _say(message: str) -> None:
    if _torchrun_rank() in (None, 0):
        console.error(message)


def _torchrun_rank() -> int | None:
    """This process's rank when torchrun started it (RANK and WORLD_SIZE set), else None."""
    rank = os.environ.get("RANK")
    if rank is None or "WORLD_SIZE" not in os.environ:
        return None
    try:
        return int(rank)
    except ValueError:
        return None


def _leave(code: int) -> NoReturn:
    if code != EXIT_OK and _torchrun_rank() is not None:
        # a rank that failed leaves now: the interpreter's teardown of a process group can wait
        # on ranks that are gone, and torchrun reports each rank's code, not its traceback
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        if _torchrun_rank() != 0:
            # torchrun stops every rank once one exits: give rank 0, which says the line (most
            # failures, a bad flag or problem, reach every rank at once), the time to say it first;
            # torchrun's SIGTERM to the other ranks may cut the wait short: this rank leaves as asked
            with contextlib.suppress(KeyboardInterrupt):
                time.sleep(RANK_GRACE_S)
        os._exit(code)
    sys.exit(code)
