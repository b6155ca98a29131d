"""An exploration's search space: the axes it varies, the base every point shares, and its file.

An axis is an integer range (``threads=1..16``: every integer), a doubling range
(``batch_size=1..512:log2``: 1, 2, 4, …, 512, as a sweep's ``A..B`` reads) or a list of values
(``precision=fp32,bf16``, ``compile=0,1``). Keys and values are read as a sweep reads them
(flowrate.campaigns.sweep.spec): the same names, aliases and typed values, so a space is a grid
that is searched rather than run whole.

Why every axis is finite: the configurations a benchmark can run are discrete (a batch of 3.7
does not exist), so the search proposes points of a grid, a point measured once is not measured
again, and the grid's size says how much of it a budget covers.

A TOML file holds ``[space]`` (key = "1..512:log2" or a list), an optional ``[base]`` and an
optional ``[explore]`` table (objectives, constraints, budget, name, seed, initial: read by
settings.py, with the rules of the flags they stand for); flags override it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowrate.campaigns.sweep.spec import (
    SweepSpec,
    canonical_key,
    parse_base,
    parse_value,
    parse_values,
    plan_points,
)
from flowrate.config import BOUNDS, RunConfig, parse_batch_size
from flowrate.errors import ConfigError

_RANGE = re.compile(r"^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*(?::\s*(\w+)\s*)?$")
EXPLORE_KEYS = ("objectives", "constraints", "budget", "name", "seed", "initial")
SPACE_FILE = "space-file"  # what a mistake in the file is blamed on: the flag that named it
# Values an axis may hold: each is settled as a run's config before anything runs (SearchSpace.check),
# and a finer grid than this is no benchmark's: narrow the range, double through it or list values.
MAX_AXIS_VALUES = 1024


@dataclass(frozen=True)
class Axis:
    """One varied option and its values, in order (a range's values ascend)."""

    name: str
    values: tuple[Any, ...]
    numeric: bool  # an ordered integer range: a sampler may model it as a number
    log2: bool = False  # a doubling range: its values are low·2^i, searched by the exponent i


def parse_axis(key: str, text: Any, source: str) -> Axis:
    """``key`` and its values as given: ``A..B``, ``A..B:log2``, a comma list or a TOML list."""
    name = canonical_key(key, source)
    match = _RANGE.match(text) if isinstance(text, str) else None
    try:
        if match is None:
            values = parse_values(name, text)
            return Axis(name, values, False)
        parse_value(name, "1..1")  # a range of a bool or a name is refused, as a sweep refuses it
        low, high, scale = int(match[1]), int(match[2]), (match[3] or "").lower()
        if low > high:
            raise ConfigError(name, f"the range {text.strip()} is empty: its low end is above its high end")
        if scale not in ("", "log2"):
            raise ConfigError(name, f"unknown scale {match[3]!r} in {text.strip()}; write A..B or A..B:log2")
        if scale and low < 1:
            raise ConfigError(name, f"a doubling range starts at 1 or more, not {low}")
        count = (high // low).bit_length() if scale else high - low + 1
        if count > MAX_AXIS_VALUES:
            raise ConfigError(
                name,
                f"the range {text.strip()} holds {count:,} values, more than the {MAX_AXIS_VALUES} an "
                "axis may hold: narrow it, double through it (A..B:log2) or list the values",
            )
        numbers = [low * 2**i for i in range(count)] if scale else list(range(low, high + 1))
        for number in (numbers[0], numbers[-1]):
            parse_value(name, number)  # an integer option: a bool or a name has no range
        return Axis(name, tuple(numbers), True, bool(scale))
    except ConfigError as mistake:
        raise ConfigError(source, f"{name}: {mistake.message}") from None


def parse_space_flags(pairs: Iterable[str]) -> list[Axis]:
    """--space KEY=VALUES flags as axes; a key given twice is a mistake."""
    entries = []
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip() or not text.strip():
            raise ConfigError(
                "space", f"expected KEY=VALUES, got {pair!r} (e.g. --space batch_size=1..512:log2)"
            )
        entries.append((key, text))
    return _axes(entries, "space")


def _axes(entries: Iterable[tuple[str, Any]], source: str) -> list[Axis]:
    axes: dict[str, Axis] = {}
    for key, text in entries:
        axis = parse_axis(key, text, source)
        if axis.name in axes:
            raise ConfigError(source, f"{axis.name} is given twice; give all its values at once")
        axes[axis.name] = axis
    return list(axes.values())


@dataclass(frozen=True)
class SpaceFile:
    """A TOML exploration file: [space], [base] and the [explore] table's settings, as read."""

    axes: list[Axis]
    base: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)


def load_space_file(path: str | Path) -> SpaceFile:
    """The file's space and base, checked, and its [explore] table as written (checked by
    settings.read_settings).

    Every value is checked for its TOML type before it is read as a sweep reads it, and every
    mistake is one ConfigError blamed on --space-file: ``PATH: KEY: what is wrong``.
    """
    with in_file(path):
        data = _read_toml(Path(path))
        unknown = [k for k in data if k not in ("space", "base", "explore")]
        if unknown:
            raise ConfigError(
                SPACE_FILE, f"unknown entry {unknown[0]!r}; it may have [space], [base], [explore]"
            )
        for table in ("space", "base", "explore"):
            if not isinstance(data.get(table, {}), dict):
                raise ConfigError(table, f"must be a table, [{table}], not {toml_type(data[table])}")
        settings = data.get("explore", {})
        stray = [k for k in settings if k not in EXPLORE_KEYS]
        if stray:
            raise ConfigError(
                SPACE_FILE, f"unknown [explore] entry {stray[0]!r}; known: {', '.join(EXPLORE_KEYS)}"
            )
        space = data.get("space", {})
        for key, value in space.items():
            _check_space_value(key, value)
        return SpaceFile(_axes(space.items(), SPACE_FILE), _base(data.get("base", {})), settings)


@contextlib.contextmanager
def in_file(path: str | Path) -> Iterator[None]:
    """A mistake in a space file, blamed on --space-file and prefixed with the file's path (and
    the key, where the mistake names one)."""
    try:
        yield
    except ConfigError as mistake:
        where = "" if mistake.field == SPACE_FILE else f"{mistake.field}: "
        raise ConfigError(SPACE_FILE, f"{path}: {where}{mistake.message}") from None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(SPACE_FILE, f"cannot read it: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ConfigError(SPACE_FILE, "is not a TOML file: it is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(SPACE_FILE, f"is not valid TOML: {error}") from None


_SCALARS = (str, int, float, bool)  # a TOML value a flag could also give


def toml_type(value: Any) -> str:
    """A TOML value's type, in TOML's words."""
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return {bool: "a boolean", int: "an integer", float: "a float", str: "a string"}.get(
        type(value), f"a {type(value).__name__}"
    )


def _check_space_value(key: str, value: Any) -> None:
    """A [space] entry is a string ("1..512:log2", "fp32,bf16"), one value, or an array of values."""
    if isinstance(value, _SCALARS):
        return
    if isinstance(value, list):
        inner = next((v for v in value if not isinstance(v, _SCALARS)), None)
        if inner is None:
            return
        raise ConfigError(key, f"an array of values (numbers, strings, booleans) holds {toml_type(inner)}")
    raise ConfigError(
        key,
        f'give a range ("1..512:log2"), a comma list ("fp32,bf16") or an array of values, '
        f"not {toml_type(value)}",
    )


def _base(table: Mapping[str, Any]) -> dict[str, Any]:
    """The [base] table as run options: one value each (a number, a string, a boolean), a
    ``problem_options`` table of such values, every number within its flag's bounds."""
    for key, value in table.items():
        inner = value if key == "problem_options" and isinstance(value, dict) else {key: value}
        for name, item in inner.items():
            if not isinstance(item, (*_SCALARS, list)):  # a list: parse_base says put it in [space]
                raise ConfigError(
                    name,
                    f"a base option takes one value (a number, a string or a boolean), not {toml_type(item)}",
                )
    base = parse_base(table, SPACE_FILE)
    for name, value in base.items():
        if name == "batch_size":
            parse_batch_size(value)  # a count within its bounds, or 'auto'
        elif name in BOUNDS:
            BOUNDS[name].check(name, value)
    return base


@dataclass(frozen=True)
class SearchSpace:
    """What an exploration varies (its axes) and what every point shares (its base)."""

    base: dict[str, Any]
    axes: tuple[Axis, ...]

    def __post_init__(self) -> None:
        if not self.axes:
            raise ConfigError(
                "space",
                "the search space is empty: give --space KEY=VALUES (e.g. --space batch_size=1..512:log2) "
                "or a [space] table in --space-file",
            )
        for axis in self.axes:
            if axis.name in self.base:
                raise ConfigError(
                    "space", f"{axis.name} is both a base option and a space axis; give it once"
                )

    @property
    def size(self) -> int:
        """How many configurations the space holds."""
        return math.prod(len(a.values) for a in self.axes)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes)

    def identity(self) -> dict[str, Any]:
        return {"base": self.base, "space": {a.name: list(a.values) for a in self.axes}}

    def neighbours(self, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The points one step from ``params`` along one axis, in the axes' order: the next value
        either side on a numeric axis, every other value on a list axis."""
        near = []
        for axis in self.axes:
            at = axis.values.index(params[axis.name])
            steps = (at - 1, at + 1) if axis.numeric else range(len(axis.values))
            near += [
                {**params, axis.name: axis.values[i]} for i in steps if 0 <= i < len(axis.values) and i != at
            ]
        return near

    def config_for(self, params: Mapping[str, Any], duration_s: float | None = None) -> RunConfig:
        """The RunConfig of one point (a sweep point's, base then params), at ``duration_s``."""
        config = SweepSpec(self.base, {a.name: a.values for a in self.axes}).config_for(params)
        return config if duration_s is None else config.replace(duration_s=duration_s)

    def check(self) -> None:
        """Build and settle a point for every value of every axis (the other axes at their first
        value), as a sweep plans its points: a bad value fails before anything runs, naming it."""
        first = {a.name: a.values[0] for a in self.axes}
        for axis in self.axes:
            others = {k: v for k, v in first.items() if k != axis.name}
            plan_points(SweepSpec({**self.base, **others}, {axis.name: axis.values}))


def merge_space(
    flag_axes: Sequence[Axis], flag_base: Mapping[str, Any], file: SpaceFile | None = None
) -> SearchSpace:
    """The space flags and a file describe: a flag overrides the file (an axis or a base value).

    A key that is both a base value and an axis in the same place is a contradiction.
    """
    file = file or SpaceFile([], {})
    for axis in flag_axes:
        if axis.name in flag_base:
            flag = axis.name.replace("_", "-")
            raise ConfigError(
                "space", f"{axis.name} is both a flag (--{flag}) and a --space axis; give it once"
            )
    for axis in file.axes:
        if axis.name in file.base:
            raise ConfigError("space-file", f"{axis.name} is in both [base] and [space]; give it once")
    given = {a.name for a in flag_axes}
    axes = [a for a in file.axes if a.name not in given and a.name not in flag_base] + list(flag_axes)
    base = {k: v for k, v in {**file.base, **flag_base}.items() if k not in given}
    return SearchSpace(base, tuple(axes))


def study_id(identity: Mapping[str, Any]) -> str:
    """A short hash of what defines a study: the same space and objectives have the same id."""
    text = json.dumps(identity, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]
