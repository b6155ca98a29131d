"""`flowrate list`: every zoo problem with its sizes and parameter counts."""

from __future__ import annotations

import json

import click


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON on stdout.")
def command(as_json: bool) -> None:
    """List the problem zoo: families, sizes and parameter counts."""
    from flowrate.cli import console
    from flowrate.cli.format import si
    from flowrate.problems.registry import SIZE_ALIASES, list_problems

    rows = list_problems()
    if as_json:
        console.data(json.dumps([vars(r) for r in rows], indent=2))
        return
    table = []
    for row in rows:
        alias = " (--problem " + row.size + ")" if row.size in SIZE_ALIASES else ""
        settings = " ".join(f"{k}={v}" for k, v in row.settings.items())
        table.append(
            [
                row.family,
                row.size + (" *" if row.is_default else "") + alias,
                si(row.parameters, digits=4),
                f"{row.parameters:,}",
                settings,
            ]
        )
    console.grid(
        "flowrate problems (* = default size; pick one with --problem NAME --size SIZE)",
        ["problem", "size", "params", "exact", "settings"],
        table,
    )
