"""The paths a command will write, checked before any work: a run that cannot save its result,
checkpoints or event files is refused before it measures, naming the flag (exit 2)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from flowrate.errors import ConfigError
from flowrate.io import STDOUT


def check_out(out: str, flag: str = "out") -> None:
    """A file the command will write: a name the file system takes, and a writable folder that
    exists or can be made (it is made now) for a new or replaced file. A FIFO or a device is
    written through as it is, and ``-`` (stdout) always can be."""
    if out == STDOUT:
        return
    path = Path(out)
    longest = _name_max(_existing(path.absolute().parent))
    if len(path.name.encode()) > longest:
        raise ConfigError(
            flag, f"the file name is {len(path.name.encode())} bytes; the file system takes {longest}"
        )
    try:
        mode: int | None = path.stat().st_mode  # through symlinks, as the write goes
    except (FileNotFoundError, NotADirectoryError):  # to be made (a file in the way: said below)
        mode = None
    except OSError as error:
        raise ConfigError(flag, f"cannot use {out}: {error.strerror}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise ConfigError(flag, f"{out} is a folder; name a file")
    if mode is not None and not stat.S_ISREG(mode):
        return  # a FIFO, a terminal, /dev/null: written through, never replaced
    folder = Path(os.path.realpath(path)).parent  # where the new file is made and renamed
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(flag, f"cannot create the folder {folder}: {error.strerror}") from None
    if not _writable(folder):
        raise ConfigError(flag, f"the folder {folder} is not writable; choose another --{flag}")


def check_html(out: str, flag: str = "html", what: str = "a survey card") -> None:
    """check_out for an HTML page: its name ends in .html or .htm (or it is ``-``, stdout)."""
    if out != STDOUT and Path(out).suffix.lower() not in (".html", ".htm"):
        raise ConfigError(flag, f"{what} is one HTML page: name it .html or .htm, not {Path(out).name}")
    check_out(out, flag)


def check_folder(path: str, flag: str) -> None:
    """A folder the command will write into: a folder already, or one that can be made in a
    writable folder (it is not made here: a refused run leaves nothing behind)."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(flag, f"{path} is not a folder")
    existing = _existing(folder.absolute())
    if not existing.is_dir():
        raise ConfigError(flag, f"cannot make {path}: {existing} is not a folder")
    if not _writable(existing):
        raise ConfigError(flag, f"{existing} is not writable; choose another --{flag.replace('_', '-')}")


def _existing(path: Path) -> Path:
    """``path``, or the nearest folder above it that exists."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _writable(folder: Path) -> bool:
    # the effective ids, as the writes will use them (root without CAP_DAC_OVERRIDE too)
    effective = os.access in os.supports_effective_ids
    return os.access(folder, os.W_OK | os.X_OK, effective_ids=effective)


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255
