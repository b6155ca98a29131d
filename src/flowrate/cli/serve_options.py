"""`flowrate serve-bench`'s options, made from ServeConfig's Settings (flowrate.config.serve): each
field's flags, help, default and bounds. Integer and number bounds become click's own ranges, so
a value out of bounds is refused as the command line is read, in click's words; the few values
with a syntax of their own (a load or a list of loads, a duration, a file) take the types below."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable
from typing import Any

import click

from flowrate.cli.param_types import Duration, FiniteRange
from flowrate.config.serve import ServeConfig
from flowrate.config.setting import SettingField, settings


class Rate(click.FloatRange):
    """--rate: requests/s above 0, or inf (every request at once); nan is refused."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail("nan is not a rate: give requests/s above 0, or inf for all at once.", param, ctx)
        return number


class Loads(click.ParamType):
    """A load, or a comma-separated list of them: a sweep, one point a load, in the order given."""

    def __init__(self, one: click.ParamType) -> None:
        self.one, self.name = one, one.name

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        return tuple(self.one.convert(part.strip(), param, ctx) for part in str(value).split(","))


# the settings whose values have a syntax of their own
OWN_TYPES: dict[str, Callable[[], click.ParamType]] = {
    "rate": lambda: Loads(Rate(min=0, min_open=True)),
    "concurrency": lambda: Loads(click.IntRange(1)),
    "budget": Duration,
    "dataset": lambda: click.Path(dir_okay=False),
    "replay": lambda: click.Path(dir_okay=False),
    "plot_path": lambda: click.Path(dir_okay=False),
}


def value_type(found: SettingField) -> click.ParamType | None:
    """The click type that reads one setting and holds it to its bounds or choices."""
    if found.name in OWN_TYPES:
        return OWN_TYPES[found.name]()
    bounds = found.bounds
    if found.kind == "choice":
        return click.Choice(found.choice_names)
    if found.kind == "folder":
        return click.Path(file_okay=False)
    if bounds is not None and found.kind == "int":
        return click.IntRange(int(bounds.low), None if bounds.high == math.inf else int(bounds.high))
    if bounds is not None and found.kind == "float":
        high = None if bounds.high == math.inf else bounds.high
        return FiniteRange(min=bounds.low, max=high, min_open=bounds.low_open)
    return None


def _required(name: str) -> bool:
    field = next(f for f in dataclasses.fields(ServeConfig) if f.name == name)
    return field.default is dataclasses.MISSING


def _option(found: SettingField) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """One setting's option. A default the field holds is shown as click shows it (beside the
    range); one only the Setting states (its default_help) is written into the help."""
    text = found.setting.help
    if found.kind == "bool":
        return click.option(*found.flags, found.name, is_flag=True, help=text)
    if _required(found.name):
        return click.option(*found.flags, found.name, required=True, help=text)
    stated = found.setting.default_help is not None
    return click.option(
        *found.flags,
        found.name,
        type=value_type(found),
        default=found.default.value if isinstance(found.default, enum.Enum) else found.default,
        help=found.help if stated else text or None,
        show_default=not stated and found.default is not None,
    )


def serve_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """Every ServeConfig setting as an option, in field order."""
    for found in reversed(settings(ServeConfig)):
        function = _option(found)(function)
    return function


def config_from(values: dict[str, Any]) -> ServeConfig:
    """The ServeConfig of the options read (a choice as its enum)."""
    typed = dict(values)
    for found in settings(ServeConfig):
        if found.choices is not None and typed.get(found.name) is not None:
            typed[found.name] = found.choices(typed[found.name])
    return ServeConfig(**typed)
