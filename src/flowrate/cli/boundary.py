"""The CLI's one boundary: how a command's failure reaches the user, as one line and an exit code.

- a ``FlowrateError``: `error: <message>` and its exit code (2 bad input, 1 the run failed);
  click's usage errors are bad input; a ``ConfigError`` names the flag;
- an ``OSError``: one line naming the path (exit 2 when the path is the user's mistake, 1 when the
  system failed, as a full disk); a reader that went away (`flowrate runs --json | head -1`)
  ends the command quietly, as Unix tools do;
- an interrupt: 130;
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
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import NoReturn, TextIO

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
    """One line for an exception or exit raised in a user's problem file; None when none was."""
    if "flowrate.problems.user" not in sys.modules:  # no user file was loaded: it cannot be one
        return None
    from flowrate.problems.user import describe_failure

    return describe_failure(error)


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
            # failures, a bad flag or problem, reach every rank at once), the time to say it first
            time.sleep(RANK_GRACE_S)
        os._exit(code)
    sys.exit(code)
