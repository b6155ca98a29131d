"""A sweep's description: grid and sweep-file parsing, the grid's points, and their plan.

A sweep is a base (the options every point shares) and a grid (option -> values); its points
are the grid's cartesian product. Each point runs a command (flowrate.campaigns.sweep.command):
`flowrate run` by default, whose keys are RunConfig field names, their flag names (batch-size,
lr, duration, preheat, …), any problem option (m, hidden, seq_len, …) or sample_shape; or
`flowrate generate`, whose keys are GenerateConfig's (batch_size, prompt_len, new_tokens, …).
Values are lists; ``A..B`` on an integer option doubles from A up to B (1..512 is
1, 2, 4, …, 512).

Why the order: within a branch (every key but batch_size equal) batch sizes come ascending, so
that when one runs out of memory the larger ones can be skipped (flowrate.campaigns.sweep.run).

Why plan first: every point's RunConfig is built and checked before anything runs, so a bad
value fails at once, naming its point, rather than minutes into the sweep.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import hashlib
import itertools
import json
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowrate.campaigns.process.job import COMMANDS, RUN, PointConfig, check_command
from flowrate.campaigns.sweep.command import SAMPLE_SHAPE, build_config, command_fields, settle
from flowrate.config import AUTO, RunConfig
from flowrate.config.setting import settings
from flowrate.config.toml_file import read_toml
from flowrate.config.values import (
    BadValue,
    doubling,
    is_range,
    items,
    to_option_int,
)
from flowrate.errors import ConfigError
from flowrate.results.store import point_key

if typing.TYPE_CHECKING:
    from flowrate.problems.base import Problem

BATCH = "batch_size"


def problem_option_keys() -> tuple[str, ...]:
    """Every shape option some zoo family takes (-O KEY=VALUE), sorted."""
    from flowrate.problems.registry import FAMILIES

    return tuple(sorted({key for family in FAMILIES.values() for key in family.options}))


def valid_keys_text(command: str = RUN) -> str:
    own = command_fields(command)
    return f"{command} options: {', '.join([*own.keys, *own.extra])}; problem options: " + ", ".join(
        problem_option_keys()
    )


def canonical_key(key: str, source: str, command: str = RUN) -> str:
    """The option a grid or base key means; an unknown one names the valid keys and a close match."""
    name = key.strip().lower().replace("-", "_")
    own = command_fields(command)
    if name in own.aliases:
        return own.aliases[name]
    options = problem_option_keys()
    if name in own.keys or name in own.extra or name in options:
        return name
    one_run = next((f for f in settings(RunConfig) if name == f.name and not f.setting.sweepable), None)
    if one_run is not None:  # --profile, the prices, --to-solution: what one run does after it ends
        what = "it" if source == key else one_run.flag
        where = f"`flowrate {command}`"
        raise ConfigError(source, f"applies to one run: give {what} to {where}, not a sweep or search")
    known = [*own.keys, *own.extra, *options, *own.aliases]
    close = difflib.get_close_matches(name, known, n=2, cutoff=0.6)
    meant = [own.aliases.get(c, c) for c in close]
    hint = f" (did you mean {' or '.join(dict.fromkeys(meant))}?)" if meant else ""
    what = f"{command} sweeps have no option" if command != RUN else "unknown option"
    raise ConfigError(source, f"{what} {key.strip()!r}{hint}; valid keys are {valid_keys_text(command)}")


# --- values --------------------------------------------------------------------------------------


def _kind(key: str, command: str) -> str:
    """How a key's values are read: as its field's Setting says, else as a problem option."""
    found = command_fields(command).settings.get(key)
    return found.kind if found is not None else "option"  # problem options and sample_shape


def parse_value(key: str, value: Any, command: str = RUN) -> list[Any]:
    """One given value of ``key``, typed (a range ``A..B`` gives several); ConfigError(key) if bad."""
    if is_range(value):
        if _kind(key, command) not in ("int", "batch", "count_or_auto", "option"):
            raise ConfigError(key, "A..B ranges are for integer options; list the values")
        return _read(key, doubling, value)
    return [_typed(key, value, command)]


def _read(key: str, reader: Callable[[Any], Any], value: Any) -> Any:
    try:
        return reader(value)
    except BadValue as bad:
        raise ConfigError(key, f"cannot read {bad.value!r} as {bad.wanted}") from None


def _typed(key: str, value: Any, command: str) -> Any:
    found = command_fields(command).settings.get(key)
    # a problem option or sample_shape: an integer, true/false as 1/0 (like -O)
    typed = found.read(value) if found is not None else _read(key, to_option_int, value)
    if key != "problem":
        return typed
    from flowrate.problems.registry import is_user_problem  # lazily: the registry imports torch

    if is_user_problem(typed):
        path, sep, factory = typed.rpartition(":")  # absolute: the same file from any folder
        return f"{Path(path).resolve()}{sep}{factory}" if sep else str(Path(typed).resolve())
    return typed


def parse_values(key: str, values: Any, command: str = RUN) -> tuple[Any, ...]:
    """A grid entry's values: a comma list, a TOML list, or ranges; duplicates dropped."""
    typed = [v for item in items(values) for v in parse_value(key, item, command)]
    if not typed:
        raise ConfigError(key, f"the grid gives it no values; list one or more, e.g. {key}=1,2")
    return tuple(dict.fromkeys(typed))


@contextlib.contextmanager
def _blame(source: str | None) -> Iterator[None]:
    """A value's mistake, blamed on where it was given (--grid, --file) and naming the key."""
    try:
        yield
    except ConfigError as mistake:
        if source is None:
            raise
        raise ConfigError(source, f"{mistake.field}: {mistake.message}") from None


def parse_grid(
    entries: Iterable[tuple[str, Any]], source: str, command: str = RUN
) -> dict[str, tuple[Any, ...]]:
    """Grid entries (key, values) with canonical keys and typed values; a key given twice is a mistake."""
    grid: dict[str, tuple[Any, ...]] = {}
    for key, values in entries:
        name = canonical_key(key, source, command)
        if name in grid:
            raise ConfigError(source, f"{name} is given twice; give all its values at once")
        with _blame(source):
            grid[name] = parse_values(name, values, command)
    return grid


def parse_grid_flags(pairs: Iterable[str], command: str = RUN) -> dict[str, tuple[Any, ...]]:
    """-g KEY=V1,V2,… flags as a grid."""
    entries = []
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError("grid", f"expected KEY=V1,V2,…, got {pair!r} (e.g. -g batch_size=1..512)")
        entries.append((key, text))
    return parse_grid(entries, "grid", command)


def parse_base(values: Mapping[str, Any], source: str | None = None, command: str = RUN) -> dict[str, Any]:
    """Options every point shares, keyed as grid keys are (problem options one by one).

    ``source`` None: the values came from flags, and a mistake names the flag itself.
    """
    base: dict[str, Any] = {}
    for key, value in values.items():
        if key == "problem_options" and isinstance(value, Mapping):
            base.update(parse_base(value, source, command))
            continue
        name = canonical_key(key, source or key, command)
        with _blame(source):
            if isinstance(value, list) or (isinstance(value, str) and ".." in value):
                raise ConfigError(name, "a base option takes one value; put several in the grid")
            [base[name]] = parse_value(name, value, command)
    return base


@dataclass(frozen=True)
class SweepFile:
    """A TOML sweep file: ``name``, ``command`` (run or generate), a ``[base]`` table of the
    command's options and a ``[grid]`` table."""

    name: str | None
    base: dict[str, Any]
    grid: dict[str, tuple[Any, ...]]
    command: str = RUN


def load_sweep_file(path: str | Path, command: str | None = None) -> SweepFile:
    """The file's sweep; ``command``: the one the flags ask for (None: the file's, else run)."""
    source = "file"
    data = read_toml(path, source)
    unknown = [k for k in data if k not in ("name", "command", "base", "grid")]
    if unknown:
        raise ConfigError(
            source, f"{path}: unknown entry {unknown[0]!r}; it may have name, command, [base], [grid]"
        )
    name = data.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ConfigError(source, f"{path}: name must be a non-empty string")
    for table in ("base", "grid"):
        if not isinstance(data.get(table, {}), dict):
            raise ConfigError(source, f"{path}: {table} must be a table, [{table}]")
    command = _file_command(data.get("command"), command, path)
    base = parse_base(data.get("base", {}), source, command)
    return SweepFile(name, base, parse_grid(data.get("grid", {}).items(), source, command), command)


def _file_command(written: Any, asked: str | None, path: str | Path) -> str:
    if written is None:
        return asked or RUN
    if not isinstance(written, str) or written not in COMMANDS:
        raise ConfigError("file", f"{path}: command must be {' or '.join(repr(c) for c in COMMANDS)}")
    if asked is not None and asked != written:
        raise ConfigError("file", f"{path} sweeps {written!r} points, the flags ask for {asked!r}")
    return written


# --- the spec ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepSpec:
    """What a sweep runs: the shared base and the grid (key -> values, in the user's order)."""

    base: dict[str, Any]
    grid: dict[str, tuple[Any, ...]]
    name: str | None = None  # None: "sweep-<id>"
    command: str = RUN  # what each point runs: flowrate run or flowrate generate

    def __post_init__(self) -> None:
        check_command(self.command, "command")
        if not self.grid:
            raise ConfigError(
                "grid",
                "the sweep grid is empty: give -g KEY=V1,V2,… (e.g. -g batch_size=1..512) or a [grid] "
                f"table in --file; valid keys are {valid_keys_text(self.command)}",
            )
        for key, values in self.grid.items():
            if not values:
                raise ConfigError("grid", f"{key}: the grid gives it no values; list one or more")
            if key in self.base:
                raise ConfigError("grid", f"{key} is both a base option and a grid key; give it once")

    @property
    def sweep_id(self) -> str:
        """A short hash of command, base, grid (order aside) and given name: the same sweep has the
        same id (a run sweep's hash leaves the command out, as before there were others)."""
        grid = {k: sorted(json.dumps(v) for v in values) for k, values in self.grid.items()}
        identity = {"base": self.base, "grid": grid, "name": self.name}
        if self.command != RUN:
            identity["command"] = self.command
        text = json.dumps(identity, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def label(self) -> str:
        return self.name or f"sweep-{self.sweep_id}"

    def to_dict(self) -> dict[str, Any]:
        grid = {k: list(v) for k, v in self.grid.items()}
        return {"base": self.base, "grid": grid, "name": self.label, "command": self.command}

    def points(self) -> list[dict[str, Any]]:
        """The grid's points, each branch's batch sizes ascending (so an out-of-memory skips the rest)."""
        return expand_grid(self.grid)

    def config_for(self, params: Mapping[str, Any]) -> RunConfig:
        """The RunConfig of one point of a run sweep (base, then the point's values)."""
        config = self.point_config(params)
        if not isinstance(config, RunConfig):
            raise ConfigError("command", f"a {self.command} sweep's points are not runs")
        return config

    def point_config(self, params: Mapping[str, Any]) -> PointConfig:
        """The config of one point: base, then the point's values (problem options gathered)."""
        values = {**self.base, **params}
        keys = command_fields(self.command).keys
        given = {k: v for k, v in values.items() if k in keys}
        options = {k: v for k, v in values.items() if k not in keys and k != SAMPLE_SHAPE}
        if SAMPLE_SHAPE in values:  # seq_len or image_size, as the point's problem says
            from flowrate.problems.registry import sample_shape_field

            options[sample_shape_field(given.get("problem", RunConfig.problem))] = values[SAMPLE_SHAPE]
        if options:
            given["problem_options"] = options
        return build_config(self.command, given)


def merge_spec(
    cli_base: Mapping[str, Any],
    cli_grid: Mapping[str, tuple[Any, ...]],
    file: SweepFile | None = None,
    name: str | None = None,
    command: str = RUN,
) -> SweepSpec:
    """The sweep flags and a sweep file describe together: flags override the file.

    A flag fixes a key the file's grid varies; a -g key replaces the file's values or base. A key
    both fixed and varied in the same place is a mistake.
    """
    file = file or SweepFile(None, {}, {}, command)
    base = {**file.base, **cli_base}
    grid = {**file.grid, **cli_grid}
    for key in sorted(set(base) & set(grid)):
        if key in cli_base and key in cli_grid:
            flag = key.replace("_", "-")
            raise ConfigError("grid", f"{key} is both a flag (--{flag}) and a grid key (-g); give it once")
        if key in cli_base:
            del grid[key]  # the flag fixes what the file varies
        elif key in cli_grid:
            del base[key]
        else:
            raise ConfigError("file", f"{key} is in both [base] and [grid]; give it once")
    return SweepSpec(base, grid, name or file.name, file.command)


def expand_grid(grid: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Cartesian product in the grid's key order, batch_size innermost and ascending ('auto' last)."""
    others = [k for k in grid if k != BATCH]
    batches = sorted(grid.get(BATCH, [None]), key=lambda b: (b == AUTO, b if isinstance(b, int) else 0))
    points = []
    for combo in itertools.product(*(grid[k] for k in others)):
        for batch in batches:
            values = dict(zip(others, combo, strict=True))
            if BATCH in grid:
                values[BATCH] = batch
            points.append({k: values[k] for k in grid})  # shown in the user's key order
    return points


def describe(params: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


# --- planning: every point built and validated before anything runs --------------------------


@dataclass(frozen=True)
class PlannedPoint:
    index: int  # 1-based position in the sweep
    params: dict[str, Any]
    config: PointConfig

    @functools.cached_property
    def key(self) -> str:
        return point_key(self.params)

    @functools.cached_property
    def branch(self) -> str:
        """Every key but batch_size: the points an out-of-memory tells something about."""
        return point_key({k: v for k, v in self.params.items() if k != BATCH})

    @property
    def batch(self) -> int | None:
        value = self.params.get(BATCH)
        return value if isinstance(value, int) else None


def plan_points(spec: SweepSpec) -> list[PlannedPoint]:
    """Every point's config, settled for its problem: a bad value fails now, naming the point.

    The ConfigError keeps the field it is about (the CLI turns it into the flag's name).
    """
    problems: dict[str, Problem] = {}
    points = spec.points()
    planned = []
    for index, params in enumerate(points, start=1):
        try:
            config = settle(spec.command, spec.point_config(params), problems)
        except ConfigError as mistake:
            raise ConfigError(
                mistake.field, f"{mistake.message} (point {index} of {len(points)}: {describe(params)})"
            ) from None
        planned.append(PlannedPoint(index, params, config))
    return planned
