"""The HTML report's plotted sections: the Pareto frontier, throughput and energy against batch
size, and each run's Rate and GlobalRate over time.

A plot shows one problem: with runs of several, each problem gets its own figure under its name
(flowrate.analysis.grouping), as large as a single one, rather than sharing axes or a cramped grid.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from matplotlib.figure import Figure

from flowrate.analysis import plots
from flowrate.analysis.grouping import by_problem, problem_of
from flowrate.analysis.html import MISSING, e, note, plot, show_value, table
from flowrate.analysis.pareto import TIE, Objective, ParetoResult, pareto_front, parse_objective
from flowrate.analysis.plots_pareto import pareto_scatter
from flowrate.errors import FlowrateError
from flowrate.results.identity import load_label
from flowrate.results.metrics import METRICS
from flowrate.results.store import StoredRun

MAX_RATE_PLOTS = 12  # one plot per run gets long; past this the report says how many it left out


def per_problem(runs: Sequence[StoredRun], draw: Callable[[list[StoredRun]], Figure], alt: str) -> str:
    """``draw`` of the runs, one figure per problem, each under its name when there are several."""
    groups = by_problem(runs)
    if len(groups) == 1:
        return plot(partial(draw, list(runs)), alt)
    return "".join(
        f"<h3>{e(problem)}</h3>" + plot(partial(draw, group), f"{alt}, {problem}")
        for problem, group in groups
    )


def throughput(runs: Sequence[StoredRun]) -> str:
    return per_problem(runs, plots.throughput_vs_batch, "samples/s against batch size")


def energy(runs: Sequence[StoredRun]) -> str:
    """samples/J against batch size for the problems with a reading; why none has one, else."""
    metered = [r for r in runs if METRICS["samples_per_joule"].value(r.result) is not None]
    if metered:
        return per_problem(metered, plots.samples_per_joule_vs_batch, "samples/J against batch size")
    reasons = sorted({str(r.result.energy.reason) for r in runs if r.result.energy.reason})
    why = "".join(f"<li>{e(reason)}</li>" for reason in reasons)
    return f'<p class="note">No run records samples/J.</p>{f"<ul>{why}</ul>" if why else ""}'


def rates(runs: Sequence[StoredRun]) -> str:
    shown = runs[:MAX_RATE_PLOTS]
    parts = []
    if len(runs) > len(shown):
        parts.append(
            note(
                f"Showing the first {len(shown)} of {len(runs)} runs; report fewer runs (a tag, filters) "
                "to see the others."
            )
        )
    for run in shown:
        parts.append(
            f'<figure><figcaption><a href="#run-{e(run.run_id)}"><code>{e(run.run_id)}</code></a> '
            f"{e(problem_of(run))}, {e(load_label(run.result) or f'batch {run.batch_size}')}</figcaption>"
            + plot(partial(plots.rate_over_time, run), f"Rate and GlobalRate over time, run {run.run_id}")
            + "</figure>"
        )
    return "".join(parts)


def pareto(runs: Sequence[StoredRun]) -> str:
    """The frontier's table, its notes, and a scatter per problem."""
    try:
        full = pareto_front(runs)
    except FlowrateError as why:
        return note(str(why))
    considered = len(full.front) + len(full.dominated)
    parts = [
        f"<p>{len(full.front)} of {considered} runs are on the frontier of "
        f"{e(', '.join(str(o) for o in full.objectives))}: no other run of the same problem is at least "
        f"as good on every objective and better on one (figures within {TIE:.0%} count as equal).</p>",
        _front_table(full),
    ]
    notes = list(full.notes)
    if full.excluded:
        reasons = sorted({why for _, why in full.excluded})
        notes.append(f"{len(full.excluded)} runs left out: {'; '.join(reasons)}")
    parts += [note(n) for n in notes]
    axes = _scatter_axes(full, runs)
    if axes is None:
        parts.append(note("one objective and no peak memory recorded: no scatter to draw"))
        return "".join(parts)
    x, y = axes
    if len(full.objectives) != 2:
        parts.append(
            note(
                f"The scatter ranks the runs on its two axes alone ({x}, {y}), so its frontier can differ "
                "from the table's."
            )
        )
    objectives = full.objectives if len(full.objectives) == 2 else [x, y]
    parts.append(
        per_problem(
            runs,
            lambda group: pareto_scatter(pareto_front(group, objectives), x, y),
            f"Pareto scatter of {x} against {y}",
        )
    )
    return "".join(parts)


def _front_table(full: ParetoResult) -> str:
    header = ["run", "problem", "precision", "device", "batch", "tags", *[str(o) for o in full.objectives]]
    rows = [
        [
            f'<a href="#run-{e(r.run_id)}"><code>{e(r.run_id)}</code></a>',
            e(problem_of(r)),
            e(r.precision or MISSING),
            e(r.device_name or r.device_type or MISSING),
            e(r.batch_size if r.batch_size is not None else MISSING),
            e(", ".join(r.tags) or MISSING),
            *[
                e(show_value(o.metric, v))
                for o, v in zip(full.objectives, full.values[r.run_id], strict=True)
            ],
        ]
        for r in full.front
    ]
    return table(header, rows, table_id="pareto", numeric=tuple(range(6, len(header))))


def _scatter_axes(full: ParetoResult, runs: Sequence[StoredRun]) -> tuple[Objective, Objective] | None:
    """samples/s against the ranking's second objective, else against peak memory where recorded."""
    first = full.objectives[0]
    if len(full.objectives) > 1:
        return first, full.objectives[1]
    memory = parse_objective("peak_memory_bytes")
    if first.name != memory.name and any(memory.metric.value(r.result) is not None for r in runs):
        return first, memory
    return None
