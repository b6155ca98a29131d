"""An exploration from `flowrate explore`'s options: its spec and how the search runs, checked
before anything runs.

The --space flags and a --space-file's [space] and [base] make the space (space.merge_space); the
run flags make the base all points share; --objective, --constraint, --budget, --name, --seed and
--initial override the file's [explore] table, each read by the same rules as its key
(flowrate.campaigns.explore.settings). --min-duration makes the rungs of run length, from it up
to the run's --duration (flowrate.campaigns.rungs.ladder).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flowrate.campaigns.explore.objectives import parse_constraints, parse_objectives
from flowrate.campaigns.explore.plan import Budget, ExploreSpec
from flowrate.campaigns.explore.settings import (
    DEFAULT_BUDGET,
    DEFAULT_OBJECTIVES,
    ExploreSettings,
    check_name,
    read_settings,
)
from flowrate.campaigns.explore.space import (
    SearchSpace,
    in_file,
    load_space_file,
    merge_space,
    parse_space_flags,
)
from flowrate.campaigns.rungs.ladder import Fidelity
from flowrate.config import RunConfig
from flowrate.errors import ConfigError


@dataclass(frozen=True)
class ExploreOptions:
    """The command's own options as given (None or empty: not given)."""

    space: tuple[str, ...] = ()  # --space KEY=VALUES
    space_file: str | None = None
    objectives: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    budget: str | None = None
    min_duration: float | None = None
    name: str | None = None
    initial: int | None = None


@dataclass(frozen=True)
class Exploration:
    """What to explore (the spec) and how the search runs: its budget, seed and initial design."""

    spec: ExploreSpec
    budget: Budget
    seed: int
    initial: int | None  # None: the plan's default for the space


def plan_exploration(options: ExploreOptions, flag_base: Callable[[], dict[str, Any]]) -> Exploration:
    """The exploration ``options`` and the run flags describe; a mistake is a ConfigError naming
    the field or the file. ``flag_base`` gives the run options the flags set, read after the space
    file, so a mistake in the file is said first."""
    settings, file = ExploreSettings(), None
    if options.space_file:
        file = load_space_file(options.space_file)
        with in_file(options.space_file):
            settings = read_settings(file.settings)
    base = flag_base()
    duration = base.pop("duration_s", None) or (file.base.pop("duration_s", None) if file else None)
    search = merge_space(parse_space_flags(options.space), base, file)
    _check_rungs(search, base, options.min_duration)
    search.check()
    spec = ExploreSpec(
        search,
        parse_objectives(options.objectives)
        if options.objectives
        else settings.objectives or parse_objectives(DEFAULT_OBJECTIVES),
        parse_constraints(options.constraints) if options.constraints else settings.constraints,
        Fidelity.ladder(duration or RunConfig.duration_s, options.min_duration),
        check_name(options.name) if options.name is not None else settings.name,
    )
    require_checkable(spec)
    seed = base.get("seed")  # --seed, checked as the line was read
    return Exploration(
        spec,
        Budget.parse(options.budget)
        if options.budget is not None
        else settings.budget or Budget.parse(DEFAULT_BUDGET),
        seed if seed is not None else settings.seed or 0,
        options.initial or settings.initial,
    )


def _check_rungs(search: SearchSpace, base: dict[str, Any], min_duration: float | None) -> None:
    """Rungs shorten a run's duration: a fixed step count, in the base or searched, cannot be."""
    if min_duration is not None and ("steps" in search.base or "steps" in search.names):
        raise ConfigError(
            "steps" if "steps" in base else "min_duration",
            "a fixed step count (steps) cannot be shortened into rungs: drop steps or --min-duration",
        )


def require_checkable(spec: ExploreSpec) -> None:
    """With the fidelity metric asked for, each configuration is also checked: a problem
    `flowrate check` cannot train is refused before anything runs."""
    from flowrate.campaigns.explore.evaluate import FIDELITY, check_config
    from flowrate.harness.fidelity import require_checkable as checkable
    from flowrate.problems.registry import get_problem

    if FIDELITY not in spec.metrics:
        return
    config = check_config(spec.space.config_for({a.name: a.values[0] for a in spec.space.axes}))
    checkable(config, get_problem(config.problem, config.size, config.problem_options))
