"""The `flowrate` command: a group of small subcommands, imported only when called.

Exit codes: 0 success; 1 the run failed (out of memory, non-finite loss, …); 2 bad input (an
unknown option or value); 130 interrupted.
"""

from __future__ import annotations

import importlib
import sys

import click

from flowrate._version import __version__

# name -> module, each exporting `command`; modules load on use so `flowrate --help` does not import torch
COMMANDS = {
    "run": "flowrate.cli.run",
    "list": "flowrate.cli.list_problems",
    "check": "flowrate.cli.check",
    "runs": "flowrate.cli.runs",
    "show": "flowrate.cli.show",
    "export": "flowrate.cli.export",
    "import": "flowrate.cli.import_",
    "compare": "flowrate.cli.compare",
    "sweep": "flowrate.cli.sweep",
    "pareto": "flowrate.cli.pareto",
    "plot": "flowrate.cli.plot",
    "report": "flowrate.cli.report",
    "data": "flowrate.cli.data",
    "analyze-input": "flowrate.cli.analyze_input",
    "scaling": "flowrate.cli.scaling",
    "validate": "flowrate.cli.validate",
    "compile": "flowrate.cli.compile",
    "estimate": "flowrate.cli.estimate",
}

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        command: click.Command = importlib.import_module(module).command
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="flowrate")
def cli() -> None:
    """Measure deep-learning throughput with numbers you can trust.

    Start with `flowrate run` (a small transformer on this machine) or `flowrate list`.
    """


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def main(argv: list[str] | None = None) -> None:
    """Console entry point: user mistakes become one line on stderr and an exit code."""
    from flowrate.cli import console
    from flowrate.errors import ConfigError, FlowrateError

    try:
        cli.main(args=argv, prog_name="flowrate", standalone_mode=False)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.UsageError as mistake:
        command = mistake.ctx.command_path if mistake.ctx else "flowrate"
        console.error(f"{mistake.format_message()} (see `{command} --help`)")
        sys.exit(EXIT_USAGE)
    except (click.Abort, KeyboardInterrupt):
        console.error("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except ConfigError as mistake:
        console.error(f"{flag_name(mistake.field)}: {mistake.message}")
        sys.exit(EXIT_USAGE)
    except FlowrateError as failure:
        console.error(str(failure))
        sys.exit(EXIT_FAILED)
    except click.ClickException as failure:
        console.error(failure.format_message())
        sys.exit(failure.exit_code)
