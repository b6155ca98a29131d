"""The command line's value types: each refuses, as the line is read, a value no run could use,
naming the flag and what would be valid, in the words the Python API uses for the same field.

A setting's type reads its field's Setting (flowrate.config.setting) when a value comes, so its
bounds are the ones its config (RunConfig, GenerateConfig) checks and a sweep's points meet.
"""

from __future__ import annotations

import math
from typing import Any

import click

from flowrate.config import AUTO, OPTION_BOUNDS, Bounds, RunConfig, parse_batch_size, setting_of
from flowrate.config.values import BadValue, to_seconds
from flowrate.errors import ConfigError


class SettingType(click.ParamType):
    """A number held to bounds as the command line is read: a config field's (by name, as its
    Setting says when the value comes) or given ones. A value no run could use is refused before
    any work, naming the flag and what would be valid."""

    def __init__(self, field: str | Bounds, config: type = RunConfig) -> None:
        self.field = field
        self.config = config
        self.name = "integer" if self.bounds.integer else "float"

    @property
    def bounds(self) -> Bounds:
        if isinstance(self.field, Bounds):
            return self.field
        bounds = setting_of(self.config, self.field).bounds
        assert bounds is not None, f"{self.field} has no bounds"
        return bounds

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        bounds = self.bounds
        number = (click.INT if bounds.integer else click.FLOAT).convert(value, param, ctx)
        fault = bounds.fault(number)
        if fault is not None:
            raise ConfigError(_flag(param, self.name), fault)
        return number


class BatchSize(click.ParamType):
    """--batch-size: a count within its bounds, or 'auto' (so `--batch-size --steps 2` blames
    --batch-size, not a stray '2')."""

    name = "batch_size"

    def __init__(self, config: type = RunConfig) -> None:
        self.config = config  # whose batch_size bounds hold

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return parse_batch_size(str(value), self.config)
        except ConfigError as mistake:
            raise ConfigError("--batch-size", mistake.message) from None


class CountOrAuto(click.ParamType):
    """A config field's count within its bounds, or 'auto' (None: the program chooses), e.g.
    --resident-blocks."""

    def __init__(self, field: str, config: type = RunConfig) -> None:
        self.field = field
        self.config = config
        self.name = field

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or str(value).strip().lower() == AUTO:
            return None
        return SettingType(self.field, self.config).convert(value, param, ctx)


def _flag(param: click.Parameter | None, name: str) -> str:
    return max(param.opts, key=len) if param else name


SHAPE = SettingType(OPTION_BOUNDS)  # the shape flags: each family's config refuses what it cannot take


class FiniteRange(click.FloatRange):
    """click's FloatRange, which lets nan and inf through its comparisons, minus both."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{number} is not a finite number.", param, ctx)
        return number


class Duration(click.ParamType):
    """A duration above 0 (flowrate.config.values.to_seconds: 90s, 3m, 2h; a bare number is
    seconds), as seconds."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float):
            return value
        try:
            return to_seconds(value)
        except BadValue as mistake:
            raise ConfigError(
                _flag(param, self.name), f"cannot read {value!r}: give {mistake.wanted}"
            ) from None
