"""`flowrate runs` lists recorded runs (or tags, or sweeps); `flowrate show RUN` shows one."""

from __future__ import annotations

import json
from typing import Any

import click

from flowrate.cli.select import filter_options, pop_filter, store_option


@click.command("runs")
@filter_options
@click.option(
    "-n", "--limit", type=click.IntRange(min=1), default=50, help="At most this many, newest first."
)
@click.option("--all", "show_all", is_flag=True, help="Every matching run (no --limit).")
@click.option("--tags", "list_tags", is_flag=True, help="List the tags in use instead, with run counts.")
@click.option("--sweeps", "list_sweeps", is_flag=True, help="List the sweeps instead, with point counts.")
@click.option("--json", "as_json", is_flag=True, help="Print the runs' headline figures as JSON on stdout.")
@store_option
def runs_command(
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

    from flowrate.cli import console
    from flowrate.results.store import Store
    from flowrate.units import rate, si

    where = dataclasses.replace(pop_filter(flags), limit=None if show_all else limit)
    with Store(store, create=False) as opened:
        if list_tags:
            tags = opened.all_tags()
            console.grid(
                f"tags in {opened.path}", ["tag", "runs"], [[t, str(n)] for t, n in tags.items()], (1,)
            )
            return
        if list_sweeps:
            rows = [
                [
                    s["sweep_id"],
                    s["name"],
                    s["created_at"][:19],
                    str(s["done"]),
                    str(s["failed"]),
                    str(s["skipped"]),
                ]
                for s in opened.sweeps()
            ]
            header = ["sweep", "name", "created (UTC)", "done", "failed", "skipped"]
            console.grid(f"sweeps in {opened.path}", header, rows, (3, 4, 5))
            return
        runs = opened.runs(where)
        path = opened.path
    if as_json:
        skip = {"result_json"}
        console.data(
            json.dumps([{k: v for k, v in vars(r).items() if k not in skip} for r in runs], indent=2)
        )
        return
    table = [
        [
            r.run_id,
            r.created_at[:19].replace("T", " "),
            ", ".join(r.tags),
            f"{r.problem}/{r.size}" if r.size else r.problem,
            " ".join(x for x in (r.mode, r.precision, r.execution) if x),
            r.device_name or "",
            str(r.batch_size or ""),
            rate(r.samples_per_sec),
            "" if r.mfu is None else f"{r.mfu:.1%}",
            "" if r.samples_per_joule is None else f"{r.samples_per_joule:.4g}",
            "" if r.peak_memory_bytes is None else si(r.peak_memory_bytes, "B"),
            "" if r.final_loss is None else f"{r.final_loss:.4f}",
        ]
        for r in runs
    ]
    header = ["run", "created (UTC)", "tags", "problem", "run", "device", "batch", "samples/s", "MFU"]
    header += ["samples/J", "peak mem", "loss"]
    console.grid(f"{len(runs)} runs in {path}", header, table, right_aligned=(6, 7, 8, 9, 10, 11))
    if not show_all and len(runs) == limit:
        console.status(f"the newest {limit} shown; --all shows every run, --limit N more or fewer")


@click.command("show")
@click.argument("ref", metavar="RUN")
@click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON on stdout.")
@store_option
def show_command(ref: str, as_json: bool, store: str | None) -> None:
    """Show one recorded run (its id, a unique prefix of it, or a result file)."""
    from pathlib import Path

    from flowrate.cli import console
    from flowrate.cli.check import fidelity_rows
    from flowrate.cli.run_text import summary_rows
    from flowrate.results.schema import Result
    from flowrate.results.store import Store

    tags: tuple[str, ...] = ()
    if Path(ref).is_file():
        result = Result.load(ref)
    else:
        with Store(store, create=False) as opened:
            run = opened.get(ref)
        result, tags = run.result, run.tags
    if as_json:
        console.data(result.to_json())
        return
    rows = fidelity_rows(result) if result.fidelity else summary_rows(result)
    rows.insert(0, ("recorded", f"{result.created_at}" + (f"  tags {', '.join(tags)}" if tags else "")))
    command_line = result.environment.get("command_line")
    if command_line:
        rows.append(("command", " ".join(str(part) for part in command_line)))
    console.key_value_table(f"flowrate run {result.run_id}", rows)
    for warning in result.warnings:
        console.warn(warning)
