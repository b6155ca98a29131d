"""Prompt and output lengths drawn from a distribution (--input-len, --output-len).

A spec is one of

- ``N``: every request N tokens; ``LOW:HIGH`` or ``uniform:LOW,HIGH``: integers uniform in
  [LOW, HIGH], both included;
- ``normal:MEAN,STD``: round(N(MEAN, STD²));
- ``lognormal:MEDIAN,SIGMA``: round(MEDIAN · e^(SIGMA·Z)), Z standard normal, so MEDIAN is the
  median length and SIGMA the standard deviation of the log-length (numpy's lognormal with
  mean = ln MEDIAN);
- ``file:PATH``: lengths drawn with replacement from a file's values: one integer a line, or a
  column of a CSV (``file:PATH.csv#COLUMN``) or a field of JSONL rows (``file:PATH.jsonl#FIELD``).

Draws are rounded and clipped to [1, MAX_TOKENS] and come from the generator the caller seeds
(serve-bench's --seed), so a run is reproducible. The spec names the workload, spelled one way for
each distribution (flowrate.results.serving.length_spec: ``uniform:64,256`` is recorded as
``64:256``).
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from flowrate.config.serve import MAX_TOKENS
from flowrate.errors import ConfigError

MAX_FILE_LENGTHS = 1_000_000  # values read from a file of lengths


@dataclass(frozen=True)
class LengthSpec:
    kind: str  # uniform (fixed N is uniform N..N), normal, lognormal or file
    params: tuple[float, ...] = ()
    values: tuple[int, ...] = ()  # a file's lengths

    def draw(self, n: int, rng: np.random.Generator) -> list[int]:
        if self.kind == "uniform":  # rng.integers as before the other kinds existed: same draws
            return [int(x) for x in rng.integers(int(self.params[0]), int(self.params[1]) + 1, size=n)]
        if self.kind == "file":
            raw = rng.choice(np.array(self.values), size=n)
        elif self.kind == "normal":
            raw = rng.normal(self.params[0], self.params[1], size=n)
        else:
            raw = rng.lognormal(math.log(self.params[0]), self.params[1], size=n)
        return [int(x) for x in np.clip(np.rint(raw), 1, MAX_TOKENS)]


def parse(text: str, flag: str) -> LengthSpec:
    """A spec (see the module's docstring); ConfigError naming `flag` for anything else."""
    kind, sep, rest = text.partition(":")
    if not sep or kind.strip().lstrip("-").isdigit():  # N or LOW:HIGH
        low, _, high = text.partition(":")
        return _uniform(low, high or low, text, flag)
    kind = kind.strip()
    if kind == "file":
        return LengthSpec("file", values=_read_file(rest, flag))
    if kind not in ("uniform", "normal", "lognormal"):
        raise ConfigError(
            flag,
            f"{text!r}: expected N, LOW:HIGH, uniform:LOW,HIGH, normal:MEAN,STD, "
            "lognormal:MEDIAN,SIGMA or file:PATH",
        )
    parts = rest.split(",")
    if len(parts) != 2:
        raise ConfigError(flag, f"{text!r}: {kind} takes two numbers separated by a comma")
    if kind == "uniform":
        return _uniform(parts[0], parts[1], text, flag)
    try:
        a, b = float(parts[0]), float(parts[1])
    except ValueError:
        raise ConfigError(flag, f"{text!r}: {kind}'s parameters must be numbers") from None
    names = ("MEAN", "STD") if kind == "normal" else ("MEDIAN", "SIGMA")
    if not (math.isfinite(a) and math.isfinite(b)) or b < 0 or not 0 < a <= MAX_TOKENS:
        raise ConfigError(
            flag,
            f"{text!r}: {names[0]} must be finite, above 0 and at most {MAX_TOKENS}; "
            f"{names[1]} finite and >= 0",
        )
    if kind == "lognormal" and b > 10:
        raise ConfigError(flag, f"{text!r}: SIGMA (of the log-length) at most 10")
    return LengthSpec(kind, (a, b))


def _uniform(low: str, high: str, text: str, flag: str) -> LengthSpec:
    try:
        pair = (int(low), int(high))
    except ValueError:
        raise ConfigError(flag, f"{text!r} is not N or LOW:HIGH (token counts)") from None
    if pair[0] < 1 or pair[1] < pair[0] or pair[1] > MAX_TOKENS:
        raise ConfigError(flag, f"{text!r}: lengths 1 to {MAX_TOKENS} and LOW <= HIGH expected")
    return LengthSpec("uniform", (float(pair[0]), float(pair[1])))


def _read_file(where: str, flag: str) -> tuple[int, ...]:
    """The lengths in PATH (one integer a line) or PATH#COLUMN (a CSV column, a JSONL field)."""
    name, _, column = where.partition("#")
    path = Path(name)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(flag, f"{path}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ConfigError(flag, f"{path} is not UTF-8 text (a file of lengths)") from None
    try:
        raw = _column(text, path, column) if column else [s for s in text.split() if s]
        values = [_length(value) for value in raw[:MAX_FILE_LENGTHS]]
    except (ValueError, TypeError, KeyError, OverflowError, RecursionError, csv.Error) as error:
        reason = f"no column {error}" if isinstance(error, KeyError) else "lengths are whole numbers"
        raise ConfigError(flag, f"{where}: {reason} from 1 to {MAX_TOKENS}") from None
    if not values:
        raise ConfigError(flag, f"{where}: no lengths in it")
    return tuple(values)


def _column(text: str, path: Path, column: str) -> list[object]:
    if path.suffix == ".csv":
        return [row[column] for row in csv.DictReader(text.splitlines())]
    return [json.loads(line)[column] for line in text.splitlines() if line.strip()]


def _length(value: object) -> int:
    """A whole number of tokens, 1 to MAX_TOKENS (ValueError otherwise)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(value)
    number = float(value)
    if not number.is_integer() or not 1 <= number <= MAX_TOKENS:
        raise ValueError(value)
    return int(number)
