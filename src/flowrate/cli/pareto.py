"""`flowrate pareto`: the recorded runs no other run beats on every objective."""

from __future__ import annotations

import json
from typing import Any

import click

from flowrate.cli.select import pop_filter, selection_options


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
    from flowrate.cli import console
    from flowrate.cli.select import select_runs

    runs = select_runs(store, refs, pop_filter(flags))
    chosen = [parse_objective(o) for o in objectives] or None
    front = pareto_front(runs, chosen)
    if as_json:
        console.data(
            json.dumps(
                {
                    "objectives": [{"metric": o.name, "maximize": o.maximize} for o in front.objectives],
                    "front": [_entry(r.run_id, front.values[r.run_id], front) for r in front.front],
                    "dominated": [_entry(r.run_id, front.values[r.run_id], front) for r in front.dominated],
                    "excluded": [{"run_id": r.run_id, "reason": why} for r, why in front.excluded],
                    "notes": front.notes,
                },
                indent=2,
            )
        )
        return
    header = ["run", "problem", "precision", "execution", "device", "batch", "tags"]
    header += [str(o) for o in front.objectives]
    listed = front.front + (front.dominated if show_dominated else [])

    def row(run: Any) -> list[str]:
        values = [
            _show(v, o.metric.name) for v, o in zip(front.values[run.run_id], front.objectives, strict=True)
        ]
        problem = f"{run.problem}/{run.size}" if run.size else run.problem
        star = "" if run in front.front else " (dominated)"
        return [
            run.run_id + star,
            problem,
            run.precision or "",
            run.execution or "",
            run.device_name or "",
            str(run.batch_size or ""),
            ", ".join(run.tags),
            *values,
        ]

    considered = len(front.front) + len(front.dominated)
    console.grid(
        f"Pareto frontier: {len(front.front)} of {considered} runs",
        header,
        [row(r) for r in listed],
        right_aligned=tuple(range(5, len(header))),
    )
    for note in front.notes:
        console.status(note)
    if front.excluded:
        reasons = sorted({why for _, why in front.excluded})
        console.warn(f"{len(front.excluded)} runs left out: {'; '.join(reasons)}")


def _entry(run_id: str, values: tuple[float, ...], front: Any) -> dict[str, Any]:
    return {"run_id": run_id, **{o.name: v for o, v in zip(front.objectives, values, strict=True)}}


def _show(value: float, metric: str) -> str:
    from flowrate.units import rate, si

    if metric == "peak_memory_bytes":
        return si(value, "B")
    if metric == "mfu":
        return f"{value:.1%}"
    if metric.endswith("per_sec"):
        return rate(value)
    return f"{value:.4g}"
