"""What a campaign's points run: `flowrate run` (a RunConfig) or `flowrate generate` (a GenerateConfig),
and, for explore's fidelity objective, `flowrate check` (a CheckConfig).

A sweep's keys are the fields of its command's config (and the zoo's problem options), so each
command has its own valid keys, their types and flag aliases. A point crosses a process boundary
(a spawned child, a Slurm job) as a job: the command's name and its config as plain data, never a
pickled object, and is rebuilt on the other side.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from flowrate.config import RunConfig, SettingField, settings
from flowrate.errors import ConfigError

if typing.TYPE_CHECKING:
    from flowrate.harness.generate import GenerateConfig
    from flowrate.problems.base import Problem

    PointConfig: TypeAlias = RunConfig | GenerateConfig
else:
    PointConfig: TypeAlias = Any

# a function that gives back the kind of config it was given
SameConfig = TypeVar("SameConfig", bound="RunConfig | GenerateConfig")

RUN = "run"
GENERATE = "generate"
COMMANDS = (RUN, GENERATE)  # what a sweep runs
CHECK = "check"  # a point's fidelity check: explore runs it for the final_loss metric
SAMPLE_SHAPE = "sample_shape"


@dataclass(frozen=True)
class CheckConfig(RunConfig):
    """A RunConfig run as `flowrate check` (flowrate.harness.fidelity.run_check): its Result
    carries the loss the configuration reaches on the problem's learnable task."""


@dataclass(frozen=True)
class CommandFields:
    """The config fields a grid or base may set for one command (problem options aside)."""

    command: str
    keys: tuple[str, ...]
    hints: Mapping[str, Any]  # field -> type, to read a value of a field without a Setting
    aliases: Mapping[str, str]  # flag name -> field (lr -> learning_rate, duration -> duration_s)
    settings: Mapping[str, SettingField] = dataclasses.field(default_factory=dict)  # a run's
    # fields, read as their Settings say

    @property
    def extra(self) -> tuple[str, ...]:
        """Keys that are not config fields: sample_shape (seq_len or image side) for runs."""
        return (SAMPLE_SHAPE,) if self.command == RUN else ()


def command_fields(command: str) -> CommandFields:
    """A run sweep's keys are RunConfig's sweepable Settings, as they are now, their flags' names
    its aliases; a generate sweep's are GenerateConfig's fields."""
    check_command(command, "command")
    if command == RUN:
        found = {f.name: f for f in settings(RunConfig) if f.setting.sweepable and f.setting.own_option}
        aliases = {alias: f.name for f in found.values() for alias in f.aliases}
        return CommandFields(RUN, tuple(found), {}, aliases, found)
    return _generate_fields()


@functools.cache
def _generate_fields() -> CommandFields:
    from flowrate.harness.generate import GenerateConfig  # imports torch: only when asked

    keys = tuple(f.name for f in dataclasses.fields(GenerateConfig) if f.name != "problem_options")
    return CommandFields(GENERATE, keys, typing.get_type_hints(GenerateConfig), {"duration": "duration_s"})


def check_command(command: str, source: str) -> None:
    if command not in COMMANDS:
        raise ConfigError(source, f"unknown command {command!r}; a sweep runs {' or '.join(COMMANDS)}")


def build_config(command: str, given: dict[str, Any]) -> PointConfig:
    """The config of one point from its fields (problem options under ``problem_options``)."""
    if command == RUN:
        return RunConfig(**given)
    from flowrate.harness.generate import GenerateConfig

    return GenerateConfig(**given)


def settle(command: str, config: Any, problems: dict[str, Problem]) -> PointConfig:
    """A point's config checked against its problem (built once per shape, kept in ``problems``):
    a bad value fails before the sweep runs anything."""
    from flowrate.problems.registry import get_problem

    cache = json.dumps([command, config.problem, config.size, config.problem_options], sort_keys=True)
    if cache not in problems:
        problems[cache] = get_problem(config.problem, config.size, config.problem_options)
    problem = problems[cache]
    if command == GENERATE:
        from flowrate.harness.generate_model import lengths, shape_of

        lengths(shape_of(problem), config.prompt_len, config.new_tokens)  # a causal LM, and it fits
        return config
    config = config.for_problem(problem.modes, problem.default_mode, problem.name)
    _check_precision_on_cpu(config)
    return config


def _check_precision_on_cpu(config: RunConfig) -> None:
    """A precision the CPU cannot run fails before the sweep (CUDA is left to each point's process:
    asking the GPU here would hold memory in this process for the whole sweep)."""
    from flowrate.config import AUTO

    if config.device not in ("cpu", AUTO):
        return
    from flowrate.execution.precision import check_supported
    from flowrate.measure.device import resolve_device

    device = resolve_device(config.device)  # asks whether CUDA is there, opens no context
    if device.type == "cpu":
        check_supported(config.precision, device)


# --- a point as a job: plain data across a process boundary ---------------------------------------


def to_job(config: PointConfig) -> dict[str, Any]:
    """``{"command": …, "config": {…}}``: JSON-able, what a fresh process or a cluster job receives."""
    if isinstance(config, CheckConfig):
        return {"command": CHECK, "config": config.to_dict()}
    from flowrate.campaigns.explore_continue import ContinuingRun

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
    return build_config(GENERATE, dict(job["config"]))


def run_job(
    job: Mapping[str, Any], argv: list[str] | None, tensorboard: str | None = None
) -> tuple[Any, list[Any]]:
    """Run one job in this process (raises what the run raises): its Result, and the Results at
    the lower rungs a job with ``rungs`` measured on its way (flowrate.campaigns.explore_continue)."""
    config = from_job(job)
    if isinstance(config, CheckConfig):
        from flowrate.harness.fidelity import run_check

        return run_check(config, argv=argv), []
    if isinstance(config, RunConfig):
        from flowrate.harness.api import run_config

        if job.get("rungs") is None:
            return run_config(config, argv=argv, tensorboard=tensorboard), []
        from flowrate.campaigns.explore_continue import RungWatch

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
