"""A campaign's point as a job: what it runs, as plain data across a process boundary.

A point runs `flowrate run` (a RunConfig) or `flowrate generate` (a GenerateConfig), and, for
explore's fidelity objective, `flowrate check` (a CheckConfig). It crosses a process boundary (a
spawned child, a Slurm job) as a job: the command's name and its config as plain data, never a
pickled object, and is rebuilt on the other side.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from flowrate.config import RunConfig
from flowrate.errors import ConfigError

if typing.TYPE_CHECKING:
    from flowrate.harness.generate import GenerateConfig

    PointConfig: TypeAlias = RunConfig | GenerateConfig
else:
    PointConfig: TypeAlias = Any

# a function that gives back the kind of config it was given
SameConfig = TypeVar("SameConfig", bound="RunConfig | GenerateConfig")

RUN = "run"
GENERATE = "generate"
COMMANDS = (RUN, GENERATE)  # what a sweep runs
CHECK = "check"  # a point's fidelity check: explore runs it for the final_loss metric


@dataclass(frozen=True)
class CheckConfig(RunConfig):
    """A RunConfig run as `flowrate check` (flowrate.harness.fidelity.run_check): its Result
    carries the loss the configuration reaches on the problem's learnable task."""


def check_command(command: str, source: str) -> None:
    if command not in COMMANDS:
        raise ConfigError(source, f"unknown command {command!r}; a sweep runs {' or '.join(COMMANDS)}")


def to_job(config: PointConfig) -> dict[str, Any]:
    """``{"command": …, "config": {…}}``: JSON-able, what a fresh process or a cluster job receives."""
    if isinstance(config, CheckConfig):
        return {"command": CHECK, "config": config.to_dict()}
    from flowrate.campaigns.rungs.watch import ContinuingRun

    if isinstance(config, ContinuingRun):  # a run that may stop at a lower rung: its plan beside
        return {"command": RUN, "config": config.run_config().to_dict(), "rungs": json.loads(config.plan)}
    if isinstance(config, RunConfig):
        return {"command": RUN, "config": config.to_dict()}
    return {"command": GENERATE, "config": dataclasses.asdict(config)}


def from_job(job: Mapping[str, Any]) -> PointConfig:
    if job["command"] == CHECK:
        return CheckConfig.from_dict(job["config"])
    check_command(job["command"], "job")
    if job["command"] == RUN:
        return RunConfig.from_dict(job["config"])
    from flowrate.harness.generate import GenerateConfig

    return GenerateConfig(**job["config"])


def run_job(
    job: Mapping[str, Any], argv: list[str] | None, tensorboard: str | None = None
) -> tuple[Any, list[Any]]:
    """Run one job in this process (raises what the run raises): its Result, and the Results at
    the lower rungs a job with ``rungs`` measured on its way (flowrate.campaigns.rungs.watch)."""
    config = from_job(job)
    if isinstance(config, CheckConfig):
        from flowrate.harness.fidelity import run_check

        return run_check(config, argv=argv), []
    if isinstance(config, RunConfig):
        from flowrate.harness.api import run_config

        if job.get("rungs") is None:
            return run_config(config, argv=argv, tensorboard=tensorboard), []
        from flowrate.campaigns.rungs.watch import RungWatch

        watch = RungWatch(job["rungs"])
        *lower, final = watch.results(run_config(config, argv=argv, tensorboard=tensorboard, rungs=watch))
        return final, lower
    from flowrate.harness.generate import run_generation
    from flowrate.problems.registry import get_problem

    problem = get_problem(config.problem, config.size, config.problem_options)
    return run_generation(config, problem, argv=argv), []


def with_problem(config: SameConfig, problem: str) -> SameConfig:
    """``config`` with another problem spec (a user problem's path made absolute)."""
    return dataclasses.replace(config, problem=problem)
