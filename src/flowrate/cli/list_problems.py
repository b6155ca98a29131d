"""`flowrate list`: every zoo problem with its sizes and parameter counts."""

from __future__ import annotations

import json

import click


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON on stdout.")
@click.option(
    "--source",
    type=click.Choice(["hf", "timm", "torchvision"], case_sensitive=False),
    help="List a library's models (prefix hf:, timm: or torchvision:) instead of the zoo.",
)
def command(as_json: bool, source: str | None) -> None:
    """List the problem zoo: families, sizes and parameter counts."""
    from flowrate.cli import console
    from flowrate.problems.registry import SIZE_ALIASES, list_problems
    from flowrate.units import count

    if source is not None:
        _list_source(source.lower(), as_json)
        return
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


def _list_source(source: str, as_json: bool) -> None:
    from flowrate.cli import console
    from flowrate.problems.registry import source_module

    names = source_module(f"{source}:").list_names()
    if as_json:
        console.data(json.dumps([{"name": n, "summary": s} for n, s in names], indent=2))
        return
    console.grid(
        f"{source}: models (random weights, built offline)", ["name", "what"], [list(r) for r in names]
    )
