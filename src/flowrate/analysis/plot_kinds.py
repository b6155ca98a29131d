"""`flowrate plot KIND`'s figure for a set of runs: which drawing each kind is, and the pareto
plot's default objectives. The drawings themselves are flowrate.analysis.plots'.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from flowrate.analysis import plots
from flowrate.analysis.pareto import Objective, ParetoResult, pareto_front, parse_objective
from flowrate.analysis.plots_pareto import pareto_scatter
from flowrate.analysis.plots_serving import run_figure
from flowrate.results.metrics import Metric
from flowrate.results.store import StoredRun


def figure_for(
    kind: str, runs: Sequence[StoredRun], metric: Metric, x_text: str | None, y_text: str | None
) -> Figure:
    """The throughput, energy, rate or serving (of runs[0]) or pareto plot of ``runs``."""
    if kind == "throughput":
        return plots.throughput_vs_batch(runs, metric)
    if kind == "energy":
        return plots.samples_per_joule_vs_batch(runs)
    if kind == "rate":
        return plots.rate_over_time(runs[0])
    if kind == "pareto":
        return pareto_scatter(*pareto_axes(runs, x_text, y_text))
    if kind == "serving":
        return run_figure(runs[0].result)
    raise ValueError(f"no plot of kind {kind!r}")


def pareto_axes(
    runs: Sequence[StoredRun], x_text: str | None, y_text: str | None
) -> tuple[ParetoResult, Objective, Objective]:
    """The ranking on the two plotted objectives, and those objectives: x samples/s unless given;
    y samples/J where every run records it (and x is not it), else peak memory, unless given."""
    x = parse_objective(x_text or "samples_per_sec")
    if y_text:
        y = parse_objective(y_text)
    else:
        energy = parse_objective("samples_per_joule")
        everywhere = all(energy.metric.value(r.result) is not None for r in runs)
        y = energy if everywhere and x.name != energy.name else parse_objective("peak_memory_bytes")
    return pareto_front(runs, [x, y]), x, y
