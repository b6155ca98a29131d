"""`flowrate plot KIND`: one plot of recorded runs, written as PNG or SVG.

The drawing lives in flowrate.analysis (plot_kinds, plots: matplotlib, imported only when a plot
is made); this module chooses the runs, checks the options fit the kind, and says where the file
went.
"""

from __future__ import annotations

from typing import Any

import click

from flowrate.cli.options import selection_options

KINDS = ("throughput", "energy", "pareto", "rate", "compare", "serving")


@click.command("plot")
@click.argument("kind", type=click.Choice(KINDS), metavar="KIND")
@selection_options
@click.option(
    "-o",
    "--out",
    type=click.Path(dir_okay=False),
    help="The image to write; .png or .svg picks the format. [default: flowrate-KIND.png]",
)
@click.option(
    "--metric",
    help="throughput and compare: the figure to plot (samples_per_sec, tokens_per_sec, mfu, "
    "samples_per_joule, peak_memory_bytes, …). [default: samples_per_sec]",
)
@click.option(
    "--x",
    "x_objective",
    metavar="METRIC[:max|min]",
    help="pareto: the x objective. [default: samples_per_sec:max]",
)
@click.option(
    "--y",
    "y_objective",
    metavar="METRIC[:max|min]",
    help="pareto: the y objective. [default: samples_per_joule where every run records it, else "
    "peak_memory_bytes]",
)
def command(
    kind: str,
    refs: tuple[str, ...],
    store: str | None,
    out: str | None,
    metric: str | None,
    x_objective: str | None,
    y_objective: str | None,
    **flags: Any,
) -> None:
    """Plot recorded runs (those named, those the filters match, or all) as PNG or SVG.

    \b
    KIND is one of:
      throughput  the metric against batch size, a panel per problem, a line per precision and device
      energy      samples/J against batch size (runs with an energy reading)
      pareto      the runs on two objectives, the Pareto frontier drawn
      rate        Rate and GlobalRate over time for exactly one run
      compare     one bar per RUN|TAG given (a tag pools its runs), with 95% CI error bars
      serving     one serve-bench run's latency CDFs (and after --find-max-rate its latency–throughput curve)
    """
    from flowrate.analysis import plots
    from flowrate.analysis.plot_kinds import figure_for
    from flowrate.cli import console
    from flowrate.cli.paths import check_out
    from flowrate.cli.select import pop_filter, select_runs
    from flowrate.results.metrics import get_metric

    path = out or f"flowrate-{kind}.png"
    _check_options(kind, path, metric, x_objective, y_objective)
    check_out(path)
    chosen = get_metric(metric or "samples_per_sec")
    where = pop_filter(flags)
    if kind == "compare":
        if refs:
            groups = [(ref, [r.result for r in select_runs(store, [ref], where)]) for ref in refs]
        else:  # filters: each run is its own bar
            groups = [(r.run_id, [r.result]) for r in select_runs(store, refs, where)]
        fig = plots.comparison_bars(groups, chosen)
    else:
        runs = select_runs(store, refs, where)
        if kind in ("rate", "serving") and len(runs) != 1:
            raise click.UsageError(
                f"the {kind} plot shows one run; {len(runs)} were selected: give one run id (or a "
                "tag or filters that match one run)"
            )
        fig = figure_for(kind, runs, chosen, x_objective, y_objective)
    written = plots.save(fig, path)
    console.status(f"plot written to {written}")


def _check_options(
    kind: str, path: str, metric: str | None, x_objective: str | None, y_objective: str | None
) -> None:
    """The image format is known and the options given fit the kind."""
    from flowrate.analysis.plots import format_for
    from flowrate.errors import FlowrateError

    try:
        format_for(path)
    except FlowrateError as why:
        raise click.BadParameter(str(why), param_hint="'--out'") from None
    if metric is not None and kind not in ("throughput", "compare"):
        raise click.UsageError(f"--metric applies to the throughput and compare plots, not {kind}")
    if (x_objective or y_objective) and kind != "pareto":
        raise click.UsageError(f"--x and --y apply to the pareto plot, not {kind}")
