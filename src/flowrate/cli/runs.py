"""`flowrate runs`: the recorded runs, newest first (or the tags, or the sweeps)."""

from __future__ import annotations

import json
from typing import Any

import click

from flowrate.cli.options import filter_options, store_option


@click.command("runs")
@filter_options
@click.option(
    "-n", "--limit", type=click.IntRange(1, 10**6), default=50, help="At most this many, newest first."
)
@click.option("--all", "show_all", is_flag=True, help="Every matching run (no --limit).")
@click.option("--tags", "list_tags", is_flag=True, help="List the tags in use instead, with run counts.")
@click.option("--sweeps", "list_sweeps", is_flag=True, help="List the sweeps instead, with point counts.")
@click.option("--json", "as_json", is_flag=True, help="Print the runs' headline figures as JSON on stdout.")
@store_option
def command(
    limit: int,
    show_all: bool,
    list_tags: bool,
    list_sweeps: bool,
    as_json: bool,
    store: str | None,
    **flags: Any,
) -> None:
    """List recorded runs, newest first: id, tags, configuration and headline figures."""
    import dataclasses

    from flowrate.cli import console, runs_text
    from flowrate.cli.select import pop_filter
    from flowrate.results.store import Store
    from flowrate.units import counted

    where = dataclasses.replace(pop_filter(flags), limit=None if show_all else limit)
    with Store(store, create=False) as opened:
        if list_tags:
            rows = runs_text.tags_rows(opened.all_tags())
            console.grid(f"tags in {opened.path}", ["tag", "runs"], rows, (1,))
            return
        if list_sweeps:
            rows = runs_text.sweeps_rows(opened.sweeps())
            console.grid(f"sweeps in {opened.path}", runs_text.SWEEPS_HEADER, rows, (3, 4, 5))
            return
        runs = opened.runs(where)
        path = opened.path
    if as_json:
        console.data(json.dumps(runs_text.runs_json(runs), indent=2))
        return
    rows = runs_text.runs_rows(runs)
    title = f"{counted(len(runs), 'run')} in {path}"
    console.grid(title, runs_text.RUNS_HEADER, rows, runs_text.RUNS_RIGHT_ALIGNED, whole=runs_text.RUNS_WHOLE)
    if not show_all and len(runs) == limit:
        console.status(f"the newest {limit} shown; --all shows every run, --limit N more or fewer")
