"""serve-bench's settings declared once (flowrate.config.serve): the command line's options, their
ranges and defaults, and ServeConfig's own checks all come from each field's Setting."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import click
import pytest

from flowrate.cli.serve_bench import command
from flowrate.cli.serve_options import config_from, value_type
from flowrate.config.bounds import Bounds
from flowrate.config.serve import Arrivals, Endpoint, ServeConfig
from flowrate.config.setting import Setting, settings
from flowrate.errors import ConfigError

BASE = {"url": "http://127.0.0.1:9", "model": "m"}


def _options() -> dict[str, click.Option]:
    return {p.name: p for p in command.params if isinstance(p, click.Option) and p.name}


def test_every_setting_is_an_option_with_its_flags_and_default() -> None:
    options = _options()
    for found in settings(ServeConfig):
        option = options[found.name]
        assert set(option.opts) == set(found.flags)
        if found.kind != "bool" and found.name not in BASE:
            default = found.default.value if isinstance(found.default, Arrivals | Endpoint) else found.default
            assert option.default == default
    assert options["url"].required and options["model"].required
    assert set(options) - {f.name for f in settings(ServeConfig)} == {
        "store", "tags", "no_store", "as_json", "out", "quiet"
    }  # fmt: skip


def _outside(bounds: Bounds) -> Any:
    if bounds.high != math.inf:
        return bounds.high + (1 if bounds.integer else 0.5)
    return bounds.low - 1 if bounds.integer else (bounds.low if bounds.low_open else bounds.low - 0.5)


def test_each_bound_holds_on_the_command_line_and_in_the_config_alike() -> None:
    checked = 0
    for found in settings(ServeConfig):
        if found.bounds is None or found.name in ("budget",):
            continue
        kind = value_type(found)
        assert isinstance(kind, click.IntRange | click.FloatRange), found.name
        assert (kind.min, kind.max) == (
            found.bounds.low,
            None if found.bounds.high == math.inf else found.bounds.high,
        )
        assert kind.min_open == found.bounds.low_open
        value = _outside(found.bounds)
        with pytest.raises(click.BadParameter):
            kind.convert(value, None, None)
        with pytest.raises(ConfigError) as caught:
            ServeConfig(**BASE, **{found.name: value})
        assert caught.value.field == found.name
        checked += 1
    assert checked == 16  # every bounded setting but --budget (a Duration: 3m, 90s)


def test_a_bound_changed_in_its_setting_moves_the_option_and_the_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """num_requests's Setting with an upper bound of 50: -n's range and ServeConfig both say 50."""
    field = next(f for f in dataclasses.fields(ServeConfig) if f.name == "num_requests")
    narrower = dataclasses.replace(field.metadata["flowrate.setting"], bounds=Bounds("1 to 50", 1, 50))
    assert isinstance(narrower, Setting)
    monkeypatch.setattr(field, "metadata", {"flowrate.setting": narrower})
    found = next(f for f in settings(ServeConfig) if f.name == "num_requests")
    kind = value_type(found)
    assert isinstance(kind, click.IntRange) and kind.max == 50
    with pytest.raises(ConfigError, match="must be at most 50"):
        ServeConfig(**BASE, num_requests=51)


def test_the_options_read_make_a_typed_config() -> None:
    config = config_from({**BASE, "endpoint": "chat", "arrivals": "constant", "rate": (1.0, 2.0)})
    assert config.endpoint is Endpoint.CHAT and config.arrivals is Arrivals.CONSTANT
    assert config.rate == (1.0, 2.0) and config.num_requests == 100 and config.request_timeout == 300.0
