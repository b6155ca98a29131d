"""A campaign's point as a job: what it runs, and as plain data across a process boundary.

A job is a config and its kind (JobKind): a run (`flowrate run` of a RunConfig, or `flowrate
generate` of a GenerateConfig), a check (`flowrate check` of a RunConfig: explore runs it for its
fidelity objective), or a run that continues through rungs (a RunConfig at full length that may
stop at a lower rung where it is beaten: flowrate.campaigns.rungs.watch, explore's rungs in one
process). It crosses a process boundary (a spawned child, a Slurm job) as plain data,
``{"command": …, "config": {…}}`` (a continuing run's plan beside, under ``rungs``), never a
pickled object, and is rebuilt on the other side.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from flowrate.campaigns.process.turns import UNMETERED, Turns
from flowrate.config import GenerateConfig, RunConfig
from flowrate.errors import ConfigError

PointConfig: TypeAlias = RunConfig | GenerateConfig

# a function that gives back the kind of config it was given
SameConfig = TypeVar("SameConfig", bound="RunConfig | GenerateConfig")

RUN = "run"
GENERATE = "generate"
COMMANDS = (RUN, GENERATE)  # what a sweep runs
CHECK = "check"  # a point's fidelity check: explore runs it for the final_loss metric


class JobKind(enum.Enum):
    """What a job does with its config."""

    RUN = "run"  # flowrate run (a RunConfig) or flowrate generate (a GenerateConfig)
    CHECK = "check"  # flowrate check: the loss the configuration reaches on its learnable task
    CONTINUE = "continue"  # a run at full length through rungs, stopped at one where it is beaten


@dataclass(frozen=True)
class Job:
    """A point to run: its config and what to do with it; ``plan`` is a continuing run's
    RungWatch plan as JSON text (flowrate.campaigns.rungs.watch.plan_for; a job stays hashable)."""

    config: PointConfig
    kind: JobKind = JobKind.RUN
    plan: str = ""

    def __post_init__(self) -> None:
        if self.kind != JobKind.RUN and not isinstance(self.config, RunConfig):
            raise ValueError(f"a {self.kind.value} job runs a RunConfig, not a {type(self.config).__name__}")
        if (self.kind == JobKind.CONTINUE) != bool(self.plan):
            raise ValueError("a continue job, and only one, has a plan")

    def to_dict(self) -> dict[str, Any]:
        """``{"command": …, "config": {…}}``: JSON-able, what a fresh process or a cluster job receives."""
        config = self.config
        if not isinstance(config, RunConfig):
            return {"command": GENERATE, "config": config.to_dict()}
        if self.kind == JobKind.CHECK:
            return {"command": CHECK, "config": config.to_dict()}
        if self.kind == JobKind.CONTINUE:  # a run that may stop at a lower rung: its plan beside
            return {"command": RUN, "config": config.to_dict(), "rungs": json.loads(self.plan)}
        return {"command": RUN, "config": config.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Job:
        if data["command"] == CHECK:
            return cls(RunConfig.from_dict(data["config"]), JobKind.CHECK)
        check_command(data["command"], "job")
        if data["command"] == RUN:
            if data.get("rungs") is not None:
                return cls(RunConfig.from_dict(data["config"]), JobKind.CONTINUE, json.dumps(data["rungs"]))
            return cls(RunConfig.from_dict(data["config"]))
        return cls(GenerateConfig(**data["config"]))


def check_command(command: str, source: str) -> None:
    if command not in COMMANDS:
        raise ConfigError(source, f"unknown command {command!r}; a sweep runs {' or '.join(COMMANDS)}")


def run_job(
    data: Mapping[str, Any],
    argv: list[str] | None,
    tensorboard: str | None = None,
    turns: Turns | None = None,
) -> tuple[Any, list[Any]]:
    """Run one job, given as plain data (Job.to_dict), in this process (raises what the run
    raises): its Result, and the Results at the lower rungs a continuing run measured on its way
    (flowrate.campaigns.rungs.watch). A plain run may take ``turns`` with another process
    (flowrate.campaigns.process.turns): it waits for its first, and hands the last over however it ends."""
    job = Job.from_dict(data)
    config = job.config
    if turns is not None:
        if job.kind != JobKind.RUN or not isinstance(config, RunConfig):
            raise ValueError("only a plain run takes turns with another process")
        from flowrate.harness.api import run_config

        turns.begin()
        try:
            run = run_config(
                config,
                argv=argv,
                tensorboard=tensorboard,
                clock=turns.clock,
                observer=turns,
                unmetered=UNMETERED,
            )
        finally:
            turns.end()
        return run, []
    if not isinstance(config, RunConfig):  # a generation
        from flowrate.harness.generate import run_generation
        from flowrate.problems.registry import get_problem

        problem = get_problem(config.problem, config.size, config.problem_options)
        return run_generation(config, problem, argv=argv), []
    if job.kind == JobKind.CHECK:
        from flowrate.harness.fidelity import run_check

        return run_check(config, argv=argv), []
    from flowrate.harness.api import run_config

    if job.kind == JobKind.CONTINUE:
        from flowrate.campaigns.rungs.watch import RungWatch

        watch = RungWatch(json.loads(job.plan))
        *lower, final = watch.results(run_config(config, argv=argv, tensorboard=tensorboard, observer=watch))
        return final, lower
    return run_config(config, argv=argv, tensorboard=tensorboard), []


def with_problem(config: SameConfig, problem: str) -> SameConfig:
    """``config`` with another problem spec (a user problem's path made absolute)."""
    return dataclasses.replace(config, problem=problem)
