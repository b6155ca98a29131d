"""`flowrate pareto`: the recorded runs no other run beats on every objective."""

from __future__ import annotations

import json
from typing import Any

import click

from flowrate.cli.options import selection_options


@click.command("pareto")
@selection_options
@click.option(
    "--objective",
    "objectives",
    multiple=True,
    metavar="METRIC[:max|min]",
    help="An objective (repeatable), e.g. samples_per_sec:max, peak_memory_bytes:min. [default: max "
    "samples/s; max samples/J, min peak memory, min loss reached — each where every run records it]",
)
@click.option("--dominated", "show_dominated", is_flag=True, help="Also list the dominated runs.")
@click.option("--json", "as_json", is_flag=True, help="Print the frontier as JSON on stdout.")
def command(
    refs: tuple[str, ...],
    store: str | None,
    objectives: tuple[str, ...],
    show_dominated: bool,
    as_json: bool,
    **flags: Any,
) -> None:
    """List the Pareto frontier of recorded runs (all, those named, or those the filters match).

    Metrics: samples_per_sec, tokens_per_sec, model_flops_per_sec, mfu, samples_per_joule,
    average_watts, peak_memory_bytes, final_loss (the loss a `flowrate check` reached).
    """
    from flowrate.analysis.pareto import pareto_front, parse_objective
    from flowrate.cli import console, pareto_text
    from flowrate.cli.select import pop_filter, select_runs

    runs = select_runs(store, refs, pop_filter(flags))
    front = pareto_front(runs, [parse_objective(o) for o in objectives] or None)
    if as_json:
        console.data(json.dumps(pareto_text.to_json(front), indent=2))
        return
    table = pareto_text.header(front), pareto_text.rows(front, show_dominated)
    console.grid(pareto_text.title(front), *table, right_aligned=pareto_text.right_aligned(front), whole=(0,))
    for note in front.notes:
        console.status(note)
    if excluded := pareto_text.excluded_warning(front):
        console.warn(excluded)
