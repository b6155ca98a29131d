"""Every subcommand's flags are its own: no flag is declared twice (click would let the last one
win silently, and the command would read the wrong value)."""

from __future__ import annotations

import click
import pytest

from flowrate.cli.main import COMMANDS, cli


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_flag_is_declared_twice(name: str) -> None:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    flags = [flag for param in command.params for flag in (*param.opts, *param.secondary_opts)]
    names = [param.name for param in command.params]
    assert len(flags) == len(set(flags)), sorted({f for f in flags if flags.count(f) > 1})
    assert len(names) == len(set(names)), sorted({n for n in names if n is not None and names.count(n) > 1})


def test_the_command_list_shows_each_command_s_summary_whole() -> None:
    from click.testing import CliRunner

    listing = " ".join(CliRunner().invoke(cli, ["--help"]).output.split())
    for name, (_, summary) in COMMANDS.items():
        assert f"{name} {summary}" in listing  # not cut with "...", as click cuts a long docstring
