"""An exploration's settings beyond its space, read by one set of rules from the flags and from
a space file's ``[explore]`` table.

Each setting has one reader, and a flag and its TOML key go through the same one: --objective and
``objectives`` (one, or an array), --constraint and ``constraints`` (one, an array, or a table
``{peak_memory = "<16GiB"}``), --budget and ``budget`` (runs or a time), --name and ``name`` (the
tag explore:NAME must be a valid tag), --seed and ``seed`` (RunConfig's bounds for a seed),
--initial and ``initial`` (INITIAL). A TOML value of another type is refused, naming the key and
the type, never converted: a seed of 1.9 is not a seed of 1.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flowrate.config import BOUNDS, INT32_MAX, Bounds
from flowrate.errors import ConfigError

if TYPE_CHECKING:  # the command line imports this module for INITIAL: it stays light
    from flowrate.campaigns.explore.objectives import Constraint, Objective
    from flowrate.campaigns.explore.plan import Budget

INITIAL = Bounds("a positive integer", 1, INT32_MAX, high_note=" (2**31 - 1)")  # --initial's points
SEED = BOUNDS["seed"]  # --seed seeds the runs and the search alike
DEFAULT_OBJECTIVES = ("samples_per_sec:max", "peak_memory_bytes:min")  # neither flag nor file names one
DEFAULT_BUDGET = "12"  # runs


@dataclass(frozen=True)
class ExploreSettings:
    """The [explore] table's settings, read (None or empty: not given)."""

    objectives: tuple[Objective, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    budget: Budget | None = None
    name: str | None = None
    seed: int | None = None
    initial: int | None = None


def read_settings(table: Mapping[str, Any]) -> ExploreSettings:
    """A space file's [explore] table, every entry read as its flag is; a mistake is a
    ConfigError naming the key (space.in_file adds the file)."""
    from flowrate.campaigns.explore.objectives import parse_constraints, parse_objectives

    read: dict[str, Any] = {}
    with _as("objectives"):
        if "objectives" in table:
            read["objectives"] = parse_objectives(_texts(table["objectives"]))
    with _as("constraints"):
        if "constraints" in table:
            read["constraints"] = parse_constraints(_texts(table["constraints"], table_of_bounds=True))
    with _as("budget"):
        if "budget" in table:
            read["budget"] = _budget(table["budget"])
    with _as("name"):
        if "name" in table:
            read["name"] = check_name(table["name"])
    for key, bounds in (("seed", SEED), ("initial", INITIAL)):
        if key in table:
            bounds.check(key, table[key])
            read[key] = table[key]
    return ExploreSettings(**read)


def check_name(name: object) -> str:
    """A study's name as given: one that makes a valid tag explore:NAME; ConfigError('name') if not."""
    from flowrate.campaigns.explore.space import toml_type
    from flowrate.results.validate import tag_problem

    if not isinstance(name, str):
        raise ConfigError("name", f"must be a string, not {toml_type(name)}")
    problem = tag_problem(f"explore:{name}") if name.strip() else "must not be empty"
    if problem:
        raise ConfigError("name", problem)
    return name


@contextlib.contextmanager
def _as(key: str) -> Iterator[None]:
    """A mistake a flag's reader blames on its flag, blamed on the file's key instead."""
    try:
        yield
    except ConfigError as mistake:
        raise ConfigError(key, mistake.message) from None


def _texts(value: Any, table_of_bounds: bool = False) -> Sequence[str]:
    """One string or an array of strings, as repeated flags give them; with ``table_of_bounds``
    also a table of METRIC = "<BOUND" (each entry the string METRIC<BOUND)."""
    from flowrate.campaigns.explore.space import toml_type

    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    if table_of_bounds and isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return tuple(f"{metric}{bound}" for metric, bound in value.items())
    wanted = (
        "a string, an array of strings or a table of bounds"
        if table_of_bounds
        else "a string or an array of strings"
    )
    raise ConfigError("value", f"give {wanted}, not {toml_type(value)}")


def _budget(value: Any) -> Budget:
    """A number of runs (an integer) or a time ("2h"), as --budget reads it."""
    from flowrate.campaigns.explore.plan import Budget
    from flowrate.campaigns.explore.space import toml_type

    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(
            "budget", f'give a number of runs (12) or a time ("2h", "90m"), not {toml_type(value)}'
        )
    return Budget.parse(str(value))
