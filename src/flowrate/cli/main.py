"""The `flowrate` command: a group of small subcommands, imported only when called.

Exit codes: 0 success; 1 the run failed (out of memory, non-finite loss, …); 2 bad input (an
unknown option or value, a path or store that cannot be used); 130 interrupted; 143 terminated
(SIGTERM, which takes Ctrl-C's path: cli/boundary.py).
"""

from __future__ import annotations

import importlib

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
    "noise": "flowrate.cli.noise",
    "history": "flowrate.cli.history",
    "sweep": "flowrate.cli.sweep",
    "explore": "flowrate.cli.explore",
    "pareto": "flowrate.cli.pareto",
    "plot": "flowrate.cli.plot",
    "report": "flowrate.cli.report",
    "data": "flowrate.cli.data",
    "analyze-input": "flowrate.cli.analyze_input",
    "scaling": "flowrate.cli.scaling",
    "validate": "flowrate.cli.validate",
    "compile": "flowrate.cli.compile",
    "estimate": "flowrate.cli.estimate",
    "generate": "flowrate.cli.generate",
    "serve-bench": "flowrate.cli.serve_bench",
    "survey": "flowrate.cli.survey",
}


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


def main(argv: list[str] | None = None) -> None:
    """Console entry point: a failure becomes one line on stderr and an exit code, and SIGTERM is
    answered as Ctrl-C is (cli/boundary.py)."""
    from flowrate.cli.boundary import answer, signals_as_interrupts
    from flowrate.process_clock import mark_command_start

    mark_command_start(fresh=argv is None)  # a budget counts from here (flowrate.process_clock)
    with signals_as_interrupts():
        answer(lambda: cli.main(args=argv, prog_name="flowrate", standalone_mode=False))
