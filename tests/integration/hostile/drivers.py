"""How a case's command runs: in this process (fast: no torch import per case), or as a real
process where only one shows the behaviour (signals, closed pipes, a full disk on stdout, a
terminal's width, torchrun, crashes that would take the test process down)."""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from flowrate.cli.main import main
from hostile.checks import Outcome


class _StillRunning(BaseException):
    """Raised by the alarm in a command that should have finished (a BaseException, so no
    `except Exception` in flowrate swallows it)."""


def _alarm(signum: int, frame: Any) -> None:
    raise _StillRunning


def in_process(argv: Sequence[str], timeout_s: float, capsys: pytest.CaptureFixture[str]) -> Outcome:
    """`flowrate ARGV` as main() runs it. An exception that escapes main() is what a user would
    see as a traceback; a command still running after ``timeout_s`` is stopped and reported."""
    capsys.readouterr()
    threads = torch.get_num_threads()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    code: int | None = None
    crash = None
    extra = ""
    try:
        main(list(argv))
        code = 0
    except SystemExit as done:
        if isinstance(done.code, str):  # sys.exit("message"): Python prints it and exits 1
            code, extra = 1, done.code + "\n"
        else:
            code = int(done.code or 0)
    except _StillRunning:
        crash = f"still running after {timeout_s:g} s (stopped)"
    except BaseException as error:
        crash = f"traceback: {type(error).__name__}: {str(error)[:300]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        torch.set_num_threads(threads)  # --threads must not leak into the next case
        gc.collect()  # what process exit would close (a store left open by a failure) is closed
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err + extra, crash)


def _command(argv: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "flowrate", *argv]


def _collect(stream: Any, into: list[bytes]) -> threading.Thread:
    def read() -> None:
        for chunk in iter(lambda: stream.read1(65536), b""):
            into.append(chunk)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def _finish(
    process: subprocess.Popen[bytes], timeout_s: float, readers: list[threading.Thread]
) -> tuple[int | None, str | None]:
    """Wait for the process; past the limit kill its whole group (children too) and say so."""
    try:
        code = process.wait(timeout=timeout_s)
        crash = None
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        code, crash = None, f"still running after {timeout_s:g} s (killed)"
    for reader in readers:
        reader.join(timeout=10)
    return code, crash


def _text(chunks: list[bytes]) -> str:
    return b"".join(chunks).decode(errors="replace")


def as_process(argv: Sequence[str], env: dict[str, str], cwd: Path, timeout_s: float, how: str) -> Outcome:
    """`python -m flowrate ARGV` in a process of its own (its own process group)."""
    if how == "pty":
        return _on_terminal(argv, env, cwd, timeout_s)
    if how == "torchrun":
        argv = ["--nproc-per-node", "2", "-m", "flowrate", *argv]
        command = [sys.executable, "-m", "torch.distributed.run", *argv]
    else:
        command = _command(argv)
    with contextlib.ExitStack() as stack:
        stdout: Any = subprocess.PIPE
        if how == "full-stdout":
            stdout = stack.enter_context(open("/dev/full", "wb"))
        process = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=stdout, stderr=subprocess.PIPE, start_new_session=True
        )
        out: list[bytes] = []
        err: list[bytes] = []
        readers = [_collect(process.stderr, err)]
        if how == "closed-stdout":
            assert process.stdout is not None
            process.stdout.close()  # the reader went away (`| head -1` after its line, or at once)
        elif stdout is subprocess.PIPE:
            readers.append(_collect(process.stdout, out))
        if how == "sigint":
            _interrupt_when(process, err, timeout_s, "preheat steps", 1.5)
        elif how == "sigint-sweep":  # the first point's fresh process is under way
            _interrupt_when(process, err, timeout_s, "each in a fresh process", 4.0)
        elif how in SIGNALLED:
            _signal_when(process, err, timeout_s, SIGNALLED[how])
        code, crash = _finish(process, timeout_s, readers)
        if how in SIGNALLED and crash is None:
            crash = _left_running(process.pid)
    stderr = _text(err)
    if how == "torchrun":
        stderr = _without_torchrun_report(stderr)
    return Outcome(code, _text(out), stderr, crash)


def _interrupt_when(
    process: subprocess.Popen[bytes], err: list[bytes], timeout_s: float, marker: str, delay_s: float
) -> None:
    """Ctrl-C (SIGINT to the whole process group) ``delay_s`` after stderr shows ``marker``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        if marker in _text(err):
            time.sleep(delay_s)
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGINT)
            return
        time.sleep(0.05)


@dataclass(frozen=True)
class Signalled:
    """A signal sent ``delay_s`` after stderr shows ``marker``: to the whole process group, as
    Ctrl-C on a terminal sends it, or to the process alone, as `kill PID` and most schedulers do."""

    signum: int
    group: bool
    marker: str
    delay_s: float


# Seconds the processes a signalled command started may take to leave once it has ended: less
# than the cases' runs last, so a run left behind is seen.
LEFT_GRACE_S = 20.0
# Drivers that signal the command, and then check that no process of its group outlives it.
SIGNALLED = {
    # the run's timed loop is under way
    "sigterm": Signalled(signal.SIGTERM, False, "preheat steps", 1.5),
    # the first point is recorded and the second under way
    "sigterm-sweep": Signalled(signal.SIGTERM, False, "point 1/", 1.0),
    # the fork server is still importing torch, and the first point's process not forked yet
    "sigint-early-sweep": Signalled(signal.SIGINT, True, "each in a fresh process", 0.3),
    "sigterm-early-sweep": Signalled(signal.SIGTERM, False, "each in a fresh process", 0.3),
}


def _signal_when(
    process: subprocess.Popen[bytes], err: list[bytes], timeout_s: float, how: Signalled
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        if how.marker in _text(err):
            time.sleep(how.delay_s)
            if process.poll() is None:
                if how.group:
                    os.killpg(process.pid, how.signum)
                else:
                    process.send_signal(how.signum)
            return
        time.sleep(0.05)


def _left_running(group: int) -> str | None:
    """None once no process of ``group`` is left (zombies aside) within LEFT_GRACE_S; else kill
    them and say which. A fork server still importing torch when the command ends leaves once its
    imports are done; a run left behind would still be running."""
    deadline = time.monotonic() + LEFT_GRACE_S
    while (left := _group_members(group)) and time.monotonic() < deadline:
        time.sleep(0.2)
    if not left:
        return None
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
    return f"processes still running after the command ended: {left}"


def _group_members(group: int) -> list[str]:
    """The live processes of process group ``group``, each as PID (NAME)."""
    members = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            text = stat_file.read_text()
            name, fields = text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()
            state, process_group = fields[0], int(fields[2])
            if process_group == group and state not in "ZX":
                members.append(f"{stat_file.parent.name} ({name})")
    return members


def _without_torchrun_report(stderr: str) -> str:
    """torchrun's own failure report (its ChildFailedError traceback) is torchrun's, not ours."""
    start = stderr.rfind("Traceback (most recent call last)")
    if start != -1 and "ChildFailedError" in stderr[start:]:
        return stderr[:start]
    return stderr


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _on_terminal(argv: Sequence[str], env: dict[str, str], cwd: Path, timeout_s: float) -> Outcome:
    """stdout on a 110-column terminal (a pseudo-terminal), stderr on a pipe."""
    main_fd, child_fd = pty.openpty()
    fcntl.ioctl(child_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 110, 0, 0))
    process = subprocess.Popen(
        _command(argv),
        cwd=cwd,
        env={**env, "COLUMNS": "110", "LINES": "40"},
        stdout=child_fd,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    os.close(child_fd)
    err: list[bytes] = []
    readers = [_collect(process.stderr, err)]
    out = bytearray()
    with contextlib.suppress(OSError):  # EIO once the child has closed the terminal
        while chunk := os.read(main_fd, 65536):
            out += chunk
    os.close(main_fd)
    code, crash = _finish(process, timeout_s, readers)
    return Outcome(code, _ANSI.sub("", out.decode(errors="replace")).replace("\r", ""), _text(err), crash)


# --- file permissions for a root test process --------------------------------------------------

_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH = 1, 2
_CAPABILITY_VERSION_3 = 0x20080522


@contextlib.contextmanager
def permissions_apply(wanted: bool) -> Iterator[None]:
    """Run the block where a read-only file or folder is read-only, as it is for a user.

    root ignores file modes through CAP_DAC_OVERRIDE; this thread drops it (and
    CAP_DAC_READ_SEARCH) from its effective set for the block and takes it back afterwards. A
    process that is not root needs nothing.
    """
    if not wanted or os.geteuid() != 0:
        yield
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [
            ("effective", ctypes.c_uint32),
            ("permitted", ctypes.c_uint32),
            ("inheritable", ctypes.c_uint32),
        ]

    header, data = Header(_CAPABILITY_VERSION_3, 0), (Data * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        pytest.skip(f"cannot read this process's capabilities ({os.strerror(ctypes.get_errno())})")
    saved = data[0].effective
    data[0].effective &= ~((1 << _CAP_DAC_OVERRIDE) | (1 << _CAP_DAC_READ_SEARCH))
    if libc.capset(ctypes.byref(header), data) != 0:
        pytest.skip(f"cannot drop CAP_DAC_OVERRIDE as root ({os.strerror(ctypes.get_errno())})")
    try:
        yield
    finally:
        data[0].effective = saved
        if libc.capset(ctypes.byref(header), data) != 0:
            raise OSError(ctypes.get_errno(), "cannot restore CAP_DAC_OVERRIDE")


def make_fifo_reader(path: Path, into: dict[str, bytes], name: str) -> Any:
    """A reader on a FIFO --out target, as `cat fifo` would be: it gets what is written through it."""

    def read() -> None:
        with contextlib.suppress(OSError), open(path, "rb") as fifo:
            into[name] = fifo.read()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def release_fifo_reader(path: Path, thread: Any) -> None:
    """Unblock a reader nothing ever wrote to (the command failed, or replaced the FIFO)."""
    thread.join(timeout=0.5)
    if thread.is_alive():
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(timeout=0.5)
