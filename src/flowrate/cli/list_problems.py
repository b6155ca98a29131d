"""`flowrate list`: every zoo problem with its sizes and parameter counts."""

from __future__ import annotations

import json

import click


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON on stdout.")
def command(as_json: bool) -> None:
    """List the problem zoo: families, sizes and parameter counts."""
    from flowrate.cli import console
    from flowrate.problems.registry import SIZE_ALIASES, list_problems
    from flowrate.units import count

    rows = list_problems()
    if as_json:
        console.data(json.dumps([vars(r) for r in rows], indent=2))
        return
    table = [
        [
            row.family,
            row.size + (" *" if row.is_default else ""),
            count(row.parameters),
            ", ".join(f"{k} {v}" for k, v in row.settings.items()),
        ]
        for row in rows
    ]
    console.grid(
        "flowrate problems (* = default size)",
        ["problem", "size", "parameters", "shape"],
        table,
        right_aligned=(2,),
    )
    aliases = ", ".join(sorted(SIZE_ALIASES))
    console.status(f"run one with --problem NAME --size SIZE; these sizes also work as --problem: {aliases}")
