"""`flowrate show RUN`: one recorded run, or a result file."""

from __future__ import annotations

import click

from flowrate.cli.options import store_option


@click.command("show")
@click.argument("ref", metavar="RUN")
@click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON on stdout.")
@store_option
def command(ref: str, as_json: bool, store: str | None) -> None:
    """Show one recorded run (its id, a unique prefix of it, or a result file)."""
    from flowrate.cli import console
    from flowrate.cli.runs_text import show_rows
    from flowrate.results.schema import Result
    from flowrate.results.store import Store
    from flowrate.results.transfer import result_file

    tags: tuple[str, ...] = ()
    file = result_file(ref)  # a .json file, else a run id: never /etc/passwd
    if file is not None:
        result = Result.load(file)
    else:
        with Store(store, create=False) as opened:
            run = opened.get(ref)
        result, tags = run.result, run.tags
    if as_json:
        console.data(result.to_json())
        return
    command = {"generate": "generate", "survey": "survey", "serve": "serve-bench"}.get(
        result.kind.value, "run"
    )
    console.key_value_table(f"flowrate {command} {result.run_id}", show_rows(result, tags), to_stdout=True)
    for warning in result.warnings:
        console.warn(warning)
