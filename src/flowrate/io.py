"""File output that never leaves a half-written file behind."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from flowrate.errors import FlowrateError


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write to a temporary file beside ``path`` and rename it over: never a half-written file.

    The file gets the permissions a plain ``open`` would give (mkstemp's 0600 would hide a shared
    result, plot or report from the people it is for).
    """
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(handle, "wb") as out:
            out.write(data.encode() if isinstance(data, str) else data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except OSError as error:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise FlowrateError(f"cannot write {path}: {error.strerror or error}") from None


def _umask() -> int:
    mask = os.umask(0o022)  # the only way to read it is to set it; put it straight back
    os.umask(mask)
    return mask
