"""`flowrate pareto`: the recorded runs no other run beats on every objective."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from flowrate.cli.options import selection_options

if TYPE_CHECKING:
    from flowrate.analysis.pareto import Objective
    from flowrate.results.store import StoredRun


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
@click.option(
    "--by",
    "axis",
    metavar="OPTION",
    help="The oracle view: for each value of this option (any run or problem option that varies among "
    "the runs, e.g. precision, batch_size, threads, seq_len), the best configuration of the others on "
    "the first objective and its frontier; repeats of a configuration pooled, each figure with its 95% "
    "interval, and a configuration dominated only by a difference beyond that noise.",
)
@click.option("--dominated", "show_dominated", is_flag=True, help="Also list the dominated runs.")
@click.option("--json", "as_json", is_flag=True, help="Print the frontier as JSON on stdout.")
def command(
    refs: tuple[str, ...],
    store: str | None,
    objectives: tuple[str, ...],
    axis: str | None,
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
    chosen = [parse_objective(o) for o in objectives] or None
    if axis is not None:
        _oracle(runs, axis, chosen, show_dominated, as_json)
        return
    front = pareto_front(runs, chosen)
    if as_json:
        console.data(json.dumps(pareto_text.to_json(front), indent=2))
        return
    table = pareto_text.header(front), pareto_text.rows(front, show_dominated)
    console.grid(pareto_text.title(front), *table, right_aligned=pareto_text.right_aligned(front), whole=(0,))
    for note in front.notes:
        console.status(note)
    if excluded := pareto_text.excluded_warning(front):
        console.warn(excluded)


def _oracle(
    runs: list[StoredRun], axis: str, objectives: list[Objective] | None, show_dominated: bool, as_json: bool
) -> None:
    from flowrate.analysis.oracle import oracle_view
    from flowrate.cli import console, pareto_text

    view = oracle_view(runs, axis, objectives)
    if as_json:
        console.data(json.dumps(pareto_text.oracle_json(view), indent=2, default=str))
        return
    rows = pareto_text.oracle_rows(view, show_dominated)
    header = pareto_text.oracle_header(view)
    right = pareto_text.oracle_right_aligned(view)
    console.grid(pareto_text.oracle_title(view), header, rows, right_aligned=right, whole=(len(header) - 1,))
    console.status(pareto_text.DOMINANCE_RULE)
    for note in view.notes:
        console.status(note)
    if excluded := pareto_text.excluded_warning(view):
        console.warn(excluded)
