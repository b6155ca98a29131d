"""`flowrate export`: runs out of the store as JSON lines or CSV."""

from __future__ import annotations

from typing import Any

import click

from flowrate.cli.options import selection_options


@click.command("export")
@selection_options
@click.option(
    "-o", "--out", type=click.Path(dir_okay=False), help="Write here (atomically). [default: stdout]"
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "csv"]),
    help="jsonl: full records with tags, for `flowrate import`; csv: headline figures for spreadsheets. "
    "[default: by --out's suffix, else jsonl]",
)
def command(refs: tuple[str, ...], store: str | None, out: str | None, fmt: str | None, **flags: Any) -> None:
    """Export runs (all, those named, or those the filters match) as JSON lines or CSV."""
    from pathlib import Path

    from flowrate.cli import console
    from flowrate.cli.paths import check_out
    from flowrate.cli.select import pop_filter, select_runs
    from flowrate.results.transfer import export
    from flowrate.units import counted

    fmt = fmt or ("csv" if out and out.lower().endswith(".csv") else "jsonl")
    if out:
        check_out(out)
    runs = select_runs(store, refs, pop_filter(flags))
    text = export(runs, Path(out) if out else None, fmt)
    if out:
        console.status(f"{counted(len(runs), 'run')} written to {out} ({fmt})")
    else:
        console.data(text)
