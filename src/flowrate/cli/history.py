"""`flowrate history -p PROBLEM --detect`: samples/s over commits, its steps, and a CI gate.

The series, their steps and the regressions are flowrate.analysis.history.history's; this module
chooses the runs, prints, and turns a regression into an exit code with --fail-if-slower.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from flowrate.cli.options import filter_options, store_option
from flowrate.cli.param_types import FiniteRange

if TYPE_CHECKING:
    from flowrate.analysis.history import History


@click.command("history")
@filter_options
@store_option
@click.option("--detect", is_flag=True, help="Fit steps (asv-style) and report each: size, interval, commit.")
@click.option(
    "--fail-if-slower",
    "fail_pct",
    type=FiniteRange(min=0),
    metavar="PCT",
    help="For CI (implies --detect): exit 1 when a series dropped by more than PCT percent at a step "
    "and its last level is still that far below the level before it.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the series (and steps) as JSON on stdout.")
def command(store: str | None, detect: bool, fail_pct: float | None, as_json: bool, **flags: Any) -> None:
    """Show a problem's samples/s across the history of the code, and find where it changed.

    Runs (chosen with -p PROBLEM and any other filters) are grouped by configuration on a
    machine; each group is one series. Points are commits — the commit of the flowrate checkout
    each run recorded, in the order commits were first recorded, each point the mean of its runs —
    or, when runs record no commit, runs in time order (said so). With --detect a fit of
    constant levels with a penalty per step, each point weighted by its runs, finds the steps:
    each with its size, its interval and the first commit after it. `flowrate report` plots each
    series with its steps marked.

    Exit codes: 0 shown; 1 a regression over --fail-if-slower; 2 bad input (no -p, no runs, or
    a history of one point).
    """
    from flowrate.analysis.history import history
    from flowrate.cli import history_text
    from flowrate.cli.select import pop_filter, select_runs
    from flowrate.errors import RunFailed

    if not flags.get("problem"):
        raise click.UsageError("name the problem: flowrate history -p PROBLEM [filters]")
    runs = select_runs(store, [], pop_filter(flags))
    max_drop = None if fail_pct is None else fail_pct / 100
    shown = history((run.result for run in runs), detect=detect, max_drop=max_drop)
    _show(shown, as_json)
    if fail_pct is not None and shown.regressions:
        raise RunFailed(history_text.gate_message(shown, fail_pct))


def _show(shown: History, as_json: bool) -> None:
    """Each series' notes as warnings; then the series as JSON, or each as a table with its steps
    and the series left out."""
    from flowrate.cli import console, history_text

    for s in shown.series:
        for line in s.notes:
            console.warn(line)
    if as_json:
        console.data(json.dumps(history_text.to_json(shown.series), indent=2))
        return
    for s in shown.series:
        table = history_text.header(s), history_text.rows(s)
        console.grid(s.title, *table, right_aligned=history_text.RIGHT_ALIGNED)
        for line in history_text.step_lines(s):
            console.status(line)
    for s in shown.left_out:
        console.status(history_text.skipped_line(s))
