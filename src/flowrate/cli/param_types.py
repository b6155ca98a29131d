"""The command line's value types: each refuses, as the line is read, a value no run could use,
naming the flag and what would be valid, in the words the Python API uses for the same field."""

from __future__ import annotations

import math
from typing import Any

import click

from flowrate.config import BOUNDS, OPTION_BOUNDS, Bounds, parse_batch_size
from flowrate.errors import ConfigError


class Setting(click.ParamType):
    """A number held to RunConfig's bounds for its field (flowrate.config.BOUNDS) as the command
    line is read: a value no run could use is refused before any work, naming the flag and what
    would be valid, in the words the Python API uses for the same field."""

    def __init__(self, field: str | Bounds) -> None:
        self.bounds = BOUNDS[field] if isinstance(field, str) else field
        self.name = "integer" if self.bounds.integer else "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = (click.INT if self.bounds.integer else click.FLOAT).convert(value, param, ctx)
        fault = self.bounds.fault(number)
        if fault is not None:
            raise ConfigError(max(param.opts, key=len) if param else self.name, fault)
        return number


class BatchSize(click.ParamType):
    """--batch-size: a count within its bounds, or 'auto' (so `--batch-size --steps 2` blames
    --batch-size, not a stray '2')."""

    name = "batch_size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return parse_batch_size(str(value))
        except ConfigError as mistake:
            raise ConfigError("--batch-size", mistake.message) from None


class ResidentBlocks(click.ParamType):
    """--resident-blocks: a count within its bounds, or 'auto' (None: the executor chooses)."""

    name = "resident_blocks"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or str(value).lower() == "auto":
            return None
        return Setting("resident_blocks").convert(value, param, ctx)


SHAPE = Setting(OPTION_BOUNDS)  # the shape flags: each family's config refuses what it cannot take


class FiniteRange(click.FloatRange):
    """click's FloatRange, which lets nan and inf through its comparisons, minus both."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{number} is not a finite number.", param, ctx)
        return number
