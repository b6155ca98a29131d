"""The HTML report's oracle section: the best configuration per value of one option, with its noise.

The report has no option to choose the axis, so it takes the first of PREFERRED that varies among
the runs (else any option but batch size, which the throughput section already plots against)
and names the others, for `flowrate pareto --by OPTION`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from flowrate.analysis.html import e, note, plot, show_value, table
from flowrate.analysis.oracle import ConfigPoint, Estimate, OracleView, oracle_view, varying_options
from flowrate.analysis.plots_pareto import oracle_scatter
from flowrate.errors import FlowrateError
from flowrate.results.store import StoredRun

PREFERRED = ("precision", "execution", "compile", "optimizer", "threads", "device_name")


def section(runs: Sequence[StoredRun]) -> str:
    """The table of each axis value's best configuration and the frontiers' plot; or why not."""
    axes = varying_options(runs)
    axis = next((a for a in PREFERRED if a in axes), None) or next(
        (a for a in axes if a != "batch_size"), None
    )
    if axis is None:
        return note(
            "The runs differ in batch size at most: no other option to find the best configuration for."
        )
    try:
        view = oracle_view(runs, axis)
    except FlowrateError as why:
        return note(str(why))
    others = [a for a in axes if a not in (axis, "batch_size")]
    parts = [
        f"<p>For each {e(axis)}, the best configuration of the other options on {e(view.objectives[0])}, "
        "with 95% intervals: between runs where a configuration was run 3 times or more, else the spread "
        "between runs pooled over the configurations that were repeated, else within its one run. A "
        "configuration is dominated only when another is better on some objective and worse on none "
        "by more than 1% and the 95% interval of the difference.</p>",
        _best_table(view),
    ]
    parts += [note(n) for n in view.notes]
    if others:
        parts.append(note(f"Other options that vary: {', '.join(others)} (`flowrate pareto --by OPTION`)."))
    if len(view.objectives) >= 2:
        parts.append(plot(partial(oracle_scatter, view), f"best configuration per {axis}"))
    return "".join(parts)


def _best_table(view: OracleView) -> str:
    shown = [k for k in view.varying if k != view.axis]
    header = [
        "problem",
        view.axis,
        "best configuration",
        *(str(o) for o in view.objectives),
        "noise",
        "tied within noise",
        "frontier",
    ]
    rows = [
        [
            e(part.problem),
            e(part.value),
            e(", ".join(f"{k}={part.best.settings.get(k)}" for k in shown) or "-"),
            *(_cell(o.metric.name, est) for o, est in zip(view.objectives, part.best.estimates, strict=True)),
            e(_source(part.best)),
            e(str(len(part.tied))),
            e(f"{len(part.front)} of {len(part.front) + len(part.dominated)}"),
        ]
        for part in view.slices
    ]
    return table(header, rows, table_id="oracle", numeric=tuple(range(3, 3 + len(view.objectives))))


def _cell(metric: str, estimate: Estimate) -> str:
    cell = e(show_value(metric, estimate.value))
    if estimate.half_width > 0:
        cell += f' <span class="ci">± {e(show_value(metric, estimate.half_width))}</span>'
    return cell


def _source(point: ConfigPoint) -> str:
    source = point.estimates[0].source
    if source == "between-run":
        return f"between {len(point.runs)} runs"
    if source == "pooled":
        runs = "1 run" if len(point.runs) == 1 else f"{len(point.runs)} runs"
        return f"{runs}, the problem's pooled between-run spread"
    return "within one run" if source == "within-run" else "none measured"
