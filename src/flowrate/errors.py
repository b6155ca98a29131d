"""The exceptions that end a command with one line and an exit code, never a traceback.

The CLI (flowrate/cli/boundary.py) prints a ``FlowrateError`` as `error: <message>` and exits
with its ``exit_code``: 2 for bad input (the default: a mistake the user can fix by changing
what they typed or named), 1 when the run itself failed. Anything else that escapes is a bug in
flowrate, or in a user's problem file, and the boundary says which.
"""

from __future__ import annotations

import errno

# The exit codes the command reference (docs/reference/cli.md) promises.
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
EXIT_READER_GONE = 141  # 128 + SIGPIPE: what a shell reports for `yes | head -1`


class FlowrateError(Exception):
    """Bad input or an unmet requirement, explained in one line that says how to fix it."""

    exit_code = EXIT_BAD_INPUT


class ConfigError(FlowrateError):
    """A configuration field holds a value flowrate cannot run with."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class RunFailed(FlowrateError):
    """The input was fine, but the run (or the check, comparison or sweep) failed."""

    exit_code = EXIT_FAILED


class DiskFull(RunFailed):
    """The disk holding a file flowrate writes is full: the system failed, not the input."""


class OutOfMemory(RunFailed):
    """The step did not fit in the device's (or host's) memory."""


class NonFiniteLoss(RunFailed):
    """The loss became NaN or infinite; the run stops and names the step."""

    def __init__(self, step: int, value: float, preheat: bool = False) -> None:
        self.step = step
        self.value = value
        where = "preheat step" if preheat else "timed step"
        super().__init__(
            f"the loss became {value} at {where} {step} (counting from 0); the run stopped. Lower "
            "--lr, use --precision fp32 or bf16 instead of fp16, or check the problem's loss"
        )


class UserCodeError(RunFailed):
    """A user's problem broke its contract while the run used it (a loss that is no scalar, a
    build_model that returns no module): the message names the user's file and method."""


# A path the user named that cannot be used as they meant: fix the path, not the machine.
_PATH_MISTAKES = frozenset(
    {
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
        errno.ENAMETOOLONG,
        errno.ELOOP,
        errno.EEXIST,
        errno.ENOTEMPTY,
        errno.ENXIO,
    }
)


# The system's reasons that mean the disk (or the user's quota on it) has no room left.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def os_error_exit_code(error: OSError) -> int:
    """2 when the path is the user's mistake (missing, a folder, not permitted), 1 when the system
    failed (disk full, file too large, I/O error), 141 when the reader of a pipe went away."""
    if error.errno == errno.EPIPE:
        return EXIT_READER_GONE
    return EXIT_BAD_INPUT if error.errno in _PATH_MISTAKES else EXIT_FAILED


class PathError(FlowrateError):
    """A file, folder or stream flowrate could not read or write: ``what`` (e.g. "cannot write
    out.json"), the system's reason, and ``after`` (what became of the file) when given. The exit
    code follows the reason (os_error_exit_code)."""

    def __init__(self, what: str, error: OSError, stdout: bool = False, after: str | None = None) -> None:
        self.errno = error.errno
        self.stdout = stdout  # standard output failed: nothing more can be printed there
        self.exit_code = os_error_exit_code(error)
        super().__init__(f"{what}: {error.strerror or error}" + (f"; {after}" if after else ""))
