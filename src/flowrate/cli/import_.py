"""`flowrate import`: runs into the store from JSON-lines exports or result files."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from flowrate.cli.options import checked_tags, store_option

if TYPE_CHECKING:
    from flowrate.results.transfer import Imported


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
    from flowrate.cli import console
    from flowrate.results.transfer import import_files

    import_files(files, store, tags, on_file=lambda done: console.status(imported_line(done)))


def imported_line(done: Imported) -> str:
    """'runs.jsonl: 3 runs imported into flowrate.db; 1 run was there already'"""
    from flowrate.units import counted

    kept = done.kept
    already = f"; {counted(kept, 'run')} {'was' if kept == 1 else 'were'} there already" if kept else ""
    return f"{done.file}: {counted(done.added, 'run')} imported into {done.store}{already}"
