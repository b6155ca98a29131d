"""`flowrate export` and `flowrate import`: runs out of and into the store as JSON lines or CSV."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from flowrate.cli.select import pop_filter, selection_options, store_option


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
def export_command(
    refs: tuple[str, ...], store: str | None, out: str | None, fmt: str | None, **flags: Any
) -> None:
    """Export runs (all, those named, or those the filters match) as JSON lines or CSV."""
    from flowrate.cli import console
    from flowrate.cli.select import select_runs
    from flowrate.results.transfer import export

    fmt = fmt or ("csv" if out and out.lower().endswith(".csv") else "jsonl")
    runs = select_runs(store, refs, pop_filter(flags))
    text = export(runs, Path(out) if out else None, fmt)
    if out:
        console.status(f"{len(runs)} runs written to {out} ({fmt})")
    else:
        console.data(text)


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False), metavar="FILE...")
@click.option("-t", "--tag", "tags", multiple=True, help="Also tag every imported run (repeatable).")
@store_option
def import_command(files: tuple[str, ...], tags: tuple[str, ...], store: str | None) -> None:
    """Import runs from JSON-lines exports or result files; runs already in the store are kept as they are.

    Each file is all or nothing: an unreadable line imports nothing from that file, and says which.
    """
    from flowrate.cli import console
    from flowrate.results.store import Store
    from flowrate.results.transfer import read_results

    loaded = {file: read_results(Path(file)) for file in files}  # every file read before any write
    with Store(store) as opened:
        for file, entries in loaded.items():
            added = opened.add_many([(result, [*own, *tags]) for result, own in entries])
            kept = len(entries) - len(added)
            already = f", {kept} already in the store" if kept else ""
            console.status(f"{file}: {len(added)} runs imported{already} into {opened.path}")
