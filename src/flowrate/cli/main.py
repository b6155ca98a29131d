"""The `flowrate` command: a group of small subcommands, imported only when called.

Exit codes: 0 success; 1 the run failed (out of memory, non-finite loss, …); 2 bad input (an
unknown option or value, a path or store that cannot be used); 130 interrupted; 143 terminated
(SIGTERM, which takes Ctrl-C's path: cli/boundary.py).
"""

from __future__ import annotations

import importlib

import click

from flowrate._version import __version__

# name -> (module, its line in `flowrate --help`); each module exports `command` and loads on use,
# so `flowrate --help` does not import torch
COMMANDS = {
    "run": ("flowrate.cli.run", "Benchmark one problem: train or infer, timed"),
    "list": ("flowrate.cli.list_problems", "List the problem zoo: families, sizes, parameters"),
    "check": ("flowrate.cli.check", "Check that training converges on a learnable task"),
    "runs": ("flowrate.cli.runs", "List recorded runs, newest first"),
    "show": ("flowrate.cli.show", "Show one recorded run"),
    "export": ("flowrate.cli.export", "Export runs as JSON lines or CSV, or to MLflow"),
    "import": ("flowrate.cli.import_", "Import runs from exports or result files"),
    "compare": ("flowrate.cli.compare", "Compare B with A, metric by metric, with a verdict"),
    "noise": ("flowrate.cli.noise", "Show the run-to-run noise the store knows"),
    "history": ("flowrate.cli.history", "Show a problem's samples/s across commits"),
    "sweep": ("flowrate.cli.sweep", "Run a grid of benchmarks, each in a fresh process"),
    "explore": ("flowrate.cli.explore", "Search run options for a frontier of objectives"),
    "pareto": ("flowrate.cli.pareto", "List the Pareto frontier of recorded runs"),
    "plot": ("flowrate.cli.plot", "Plot recorded runs"),
    "report": ("flowrate.cli.report", "Write an HTML report on recorded runs"),
    "data": ("flowrate.cli.data", "Sharded datasets for run --data and analyze-input"),
    "analyze-input": ("flowrate.cli.analyze_input", "Find how many loader workers keep the model fed"),
    "scaling": ("flowrate.cli.scaling", "Weak scaling across process counts"),
    "validate": ("flowrate.cli.validate", "Check a configuration without running it"),
    "compile": ("flowrate.cli.compile", "Compile a step with torch.compile, and cache it"),
    "estimate": ("flowrate.cli.estimate", "Estimate samples/s before running (a cost model)"),
    "generate": ("flowrate.cli.generate", "Generate with a KV cache: TTFT, TPOT, tokens/s"),
    "serve-bench": ("flowrate.cli.serve_bench", "Load-test a server speaking the OpenAI API"),
    "survey": ("flowrate.cli.survey", "Measure what this machine can do: a report card"),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, summary = COMMANDS[cmd_name]
        command: click.Command = importlib.import_module(module).command
        command.short_help = summary  # whole, where click would cut the docstring's first line
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
