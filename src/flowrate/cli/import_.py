"""`flowrate import`: runs into the store from JSON-lines exports or result files."""

from __future__ import annotations

import click

from flowrate.cli.options import checked_tags, store_option


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False), metavar="FILE...")
@click.option(
    "-t",
    "--tag",
    "tags",
    multiple=True,
    callback=checked_tags,
    help="Also tag every imported run (repeatable).",
)
@store_option
def command(files: tuple[str, ...], tags: tuple[str, ...], store: str | None) -> None:
    """Import runs from JSON-lines exports or result files; runs already in the store are kept as they are.

    Each file is all or nothing: an unreadable line imports nothing from that file, and says which.
    """
    from pathlib import Path

    from flowrate.cli import console
    from flowrate.results.store import Store
    from flowrate.results.transfer import read_results
    from flowrate.units import counted

    loaded = {file: read_results(Path(file)) for file in files}  # every file read before any write
    with Store(store) as opened:
        for file, entries in loaded.items():
            added = opened.add_many([(result, [*own, *tags]) for result, own in entries])
            kept = len(entries) - len(added)
            already = (
                f"; {counted(kept, 'run')} {'was' if kept == 1 else 'were'} there already" if kept else ""
            )
            console.status(f"{file}: {counted(len(added), 'run')} imported into {opened.path}{already}")
