"""`flowrate export`: runs out of the store as JSON lines or CSV, or into MLflow (--mlflow)."""

from __future__ import annotations

from typing import Any

import click

from flowrate.cli.mlflow_option import mlflow_options
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
@mlflow_options
def command(
    refs: tuple[str, ...],
    store: str | None,
    out: str | None,
    fmt: str | None,
    mlflow_uri: str | None,
    mlflow_experiment: str | None,
    **flags: Any,
) -> None:
    """Export runs (all, those named, or those the filters match) as JSON lines or CSV, or send
    them to MLflow with --mlflow (a run already there is not sent again)."""
    from pathlib import Path

    from flowrate.cli import console
    from flowrate.cli.mlflow_option import open_mlflow, send_runs
    from flowrate.cli.paths import check_out
    from flowrate.cli.select import pop_filter, select_runs
    from flowrate.results.transfer import export
    from flowrate.units import counted

    if mlflow_uri is not None and (out or fmt):
        raise click.UsageError(
            "--mlflow sends runs to MLflow; --out and --format write a file: one or the other"
        )
    mlflow = open_mlflow(mlflow_uri, mlflow_experiment)
    if mlflow is not None:
        send_runs(mlflow, select_runs(store, refs, pop_filter(flags)))
        return
    fmt = fmt or ("csv" if out and out.lower().endswith(".csv") else "jsonl")
    if out:
        check_out(out)
    runs = select_runs(store, refs, pop_filter(flags))
    text = export(runs, Path(out) if out else None, fmt)
    if out:
        console.status(f"{counted(len(runs), 'run')} written to {out} ({fmt})")
    else:
        console.data(text)
