"""File output that never leaves a half-written file behind, and never replaces what is not a file.

``write_atomic`` is the one way flowrate writes a file (results, exports, reports, plots, dataset
indexes, caches). The target is resolved first, so a symlink stays a symlink (``latest.json ->
run-42.json``: run-42.json gets the new content). A regular file is replaced atomically: the
content goes to a temporary file beside it, which is renamed over it. Anything else is written
through as it is, never replaced: a FIFO, a terminal, /dev/stdout or /dev/null get the bytes.
``-`` means standard output. A failure is a PathError naming the path, whose exit code follows
the system's reason (a full disk, as /dev/full's ENOSPC, is not the user's mistake); where a full
disk stops a file being written, the line says so, and that the file already there is unchanged.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path

from flowrate.errors import DISK_FULL_ERRNOS, FlowrateError, PathError

STDOUT = "-"


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Write ``data`` to ``path``: atomically for a regular file, straight through for a FIFO or a
    character device, to standard output for ``-``. Any failure is a FlowrateError naming the path.
    """
    content = data.encode() if isinstance(data, str) else data
    if os.fspath(path) == STDOUT:
        _write_stdout(content)
        return
    given = Path(path)
    found: os.stat_result | None = None
    try:
        found = _stat(given)  # what the path names, through every link, as the kernel follows them
        if found is not None and (stat.S_ISFIFO(found.st_mode) or stat.S_ISCHR(found.st_mode)):
            _write_through(given, content)  # by the given name: /proc/self/fd/1 has no other
            return
        if found is not None and not stat.S_ISREG(found.st_mode):
            kind = "a directory" if stat.S_ISDIR(found.st_mode) else "not a file, FIFO or character device"
            raise FlowrateError(f"cannot write {given}: it is {kind}")
        target = Path(os.path.realpath(given))  # the file a symlink names gets the content
        if found is None:
            _replace(target, content, None)
        elif _same_file(target, found):
            _replace(target, content, found.st_mode)
        else:  # a /proc fd link to a deleted file: only the link itself still reaches it
            _write_through(given, content)
    except OSError as error:
        raise PathError(f"cannot write {given}", error, after=_after_full(error, given, found)) from None


def _after_full(error: OSError, given: Path, found: os.stat_result | None) -> str | None:
    """What a full disk left of the file: a file is never half-replaced. None when the disk is
    not full, or the path is a device or FIFO written through (no file of ours was there)."""
    if error.errno not in DISK_FULL_ERRNOS:
        return None
    if found is None:
        return "the disk holding it is full; nothing was written"
    if stat.S_ISREG(found.st_mode):
        return f"the disk holding it is full; {given} is unchanged"
    return None


def _stat(path: Path) -> os.stat_result | None:
    """What ``path`` names (links followed), or None where nothing is there yet."""
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def _same_file(name: Path, found: os.stat_result) -> bool:
    """Whether ``name`` is the file ``found`` describes (a /proc fd link's text may name none)."""
    try:
        return os.path.samestat(name.stat(), found)
    except OSError:
        return False


def _replace(target: Path, content: bytes, mode: int | None) -> None:
    """Write a temporary file beside ``target`` and rename it over: never a half-written file.

    A new file gets the permissions a plain ``open`` would give (mkstemp's 0600 would hide a shared
    result, plot or report from the people it is for); a replaced one keeps its own.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            os.fchmod(out.fileno(), stat.S_IMODE(mode) if mode is not None else 0o666 & ~_umask())
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_through(target: Path, content: bytes) -> None:
    """A FIFO or a device is written as it is: renaming a file over it would replace it. It is
    opened by the name given, links and all: a link into /proc/self/fd leads where its text
    (``pipe:[N]``) cannot."""
    with open(target, "wb") as out:  # ENOSPC (/dev/full) surfaces here, at the flush on close
        out.write(content)


def _write_stdout(content: bytes) -> None:
    try:
        sys.stdout.flush()  # whatever was printed before comes first
        binary = getattr(sys.stdout, "buffer", None)
        if binary is None:  # a text-only stand-in for stdout
            sys.stdout.write(content.decode())
            sys.stdout.flush()
        else:
            binary.write(content)
            binary.flush()
    except OSError as error:
        raise PathError("cannot write to standard output", error, stdout=True) from None


def _umask() -> int:
    mask = os.umask(0o022)  # the only way to read it is to set it; put it straight back
    os.umask(mask)
    return mask
