"""`flowrate report`: one self-contained HTML file about a set of runs, to read anywhere offline.

The page is built by flowrate.analysis.report; this module chooses the runs and writes the file
atomically, so a report that is being regenerated is never seen half-written.
"""

from __future__ import annotations

from typing import Any

import click

from flowrate.cli.options import selection_options

DEFAULT_OUT = "flowrate-report.html"


@click.command("report")
@selection_options
@click.option(
    "-o",
    "--out",
    type=click.Path(dir_okay=False),
    default=DEFAULT_OUT,
    show_default=True,
    help="The HTML file to write.",
)
@click.option("--title", help="The report's title. [default: 'flowrate report: N runs' (and M surveys)]")
def command(refs: tuple[str, ...], store: str | None, out: str, title: str | None, **flags: Any) -> None:
    """Write an HTML report on recorded runs (those named, those the filters match, or all).

    One file with everything inline (no network needed to read it): a runs table, the Pareto
    frontier, throughput and samples/J against batch size, Rate and GlobalRate over time for each
    run (the first 12), each configuration's samples/s across commits with its steps marked (as
    `flowrate history --detect` finds them), the environments the runs were measured in, and
    every measurement warning.
    """
    from pathlib import Path

    from flowrate.analysis.report import render_report
    from flowrate.cli import console
    from flowrate.cli.paths import check_html
    from flowrate.cli.select import pop_filter, select_runs
    from flowrate.estimate.reprice import recompute_with_calibration
    from flowrate.io import write_atomic
    from flowrate.results.sections import Kind
    from flowrate.units import counted

    check_html(out, "out", "a report")
    runs = select_runs(store, refs, pop_filter(flags))
    surveys = sum(r.result.kind is Kind.SURVEY for r in runs)  # a section apart, not runs
    counts = counted(len(runs) - surveys, "run") + (f" and {counted(surveys, 'survey')}" if surveys else "")
    title = title or f"flowrate report: {counts}"
    page = render_report(runs, title=title, reprice=recompute_with_calibration())
    path = Path(out)
    write_atomic(path, page)
    console.status(f"report written to {path} ({counted(len(runs), 'run')})")
