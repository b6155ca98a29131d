"""A user's TOML file (a sweep file, a prices file), read with one line per way it can be wrong."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from flowrate.errors import ConfigError


def read_toml(path: str | Path, field: str) -> dict[str, Any]:
    """The file's table; ConfigError(``field``) naming the file where it cannot be read, is not
    UTF-8 text, or is not valid TOML."""
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(field, f"cannot read {path}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ConfigError(field, f"{path} is not a TOML file: it is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(field, f"{path} is not valid TOML: {error}") from None
