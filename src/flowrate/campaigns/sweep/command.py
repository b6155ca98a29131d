"""What a sweep's points set: the fields of its command's config, `flowrate run` (a RunConfig) or
`flowrate generate` (a GenerateConfig).

A sweep's keys are the fields of its command's config (and the zoo's problem options), so each
command has its own valid keys, their types and flag aliases. A point runs as a job
(flowrate.campaigns.process.job).
"""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flowrate.campaigns.process.job import GENERATE, RUN, PointConfig, check_command
from flowrate.config import GenerateConfig, RunConfig, SettingField, settings

if typing.TYPE_CHECKING:
    from flowrate.problems.base import Problem

SAMPLE_SHAPE = "sample_shape"


@dataclass(frozen=True)
class CommandFields:
    """The config fields a grid or base may set for one command (problem options aside)."""

    command: str
    keys: tuple[str, ...]
    aliases: Mapping[str, str]  # flag name -> field (lr -> learning_rate, duration -> duration_s)
    settings: Mapping[str, SettingField]  # each key's field, read as its Setting says

    @property
    def extra(self) -> tuple[str, ...]:
        """Keys that are not config fields: sample_shape (seq_len or image side) for runs."""
        return (SAMPLE_SHAPE,) if self.command == RUN else ()


def command_fields(command: str) -> CommandFields:
    """A sweep's keys are its command's config's sweepable Settings (RunConfig's or GenerateConfig's),
    as they are now, their flags' names its aliases."""
    check_command(command, "command")
    config = RunConfig if command == RUN else GenerateConfig
    found = {f.name: f for f in settings(config) if f.setting.sweepable and f.setting.own_option}
    aliases = {alias: f.name for f in found.values() for alias in f.aliases}
    return CommandFields(command, tuple(found), aliases, found)


def build_config(command: str, given: dict[str, Any]) -> PointConfig:
    """The config of one point from its fields (problem options under ``problem_options``)."""
    if command == RUN:
        return RunConfig(**given)
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
