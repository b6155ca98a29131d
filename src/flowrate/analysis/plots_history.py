"""The history figure and the report's History section: samples/s point by point (commits, or
runs in time order), the fitted levels, and each step marked with its size."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from matplotlib.figure import Figure

from flowrate.analysis import canvas
from flowrate.analysis.history import Series, build_series, with_steps
from flowrate.analysis.html import e, note, plot
from flowrate.results.metrics import METRICS
from flowrate.results.schema import Result

MAX_SERIES = 6  # one figure per configuration; past this the section says how many it left out
MAX_TICKS = 12  # commit labels on the x axis before they are thinned


def history_figure(series: Series) -> Figure:
    """Each point's samples/s (marker size: its runs), the fitted levels, a line at each step."""
    fig = canvas.new_figure()
    ax = fig.subplots()
    xs = list(range(len(series.points)))
    values = [p.samples_per_sec for p in series.points]
    ax.scatter(xs, values, s=[12 + 8 * min(p.runs, 8) for p in series.points], zorder=3)
    if series.fit is not None:
        for (start, end), level in zip(series.fit.bounds, series.fit.levels, strict=True):
            ax.hlines(level, start - 0.4, end - 0.6, color=canvas.FRONT_COLOUR, lw=2)
        for step in series.fit.steps:
            ax.axvline(step.index - 0.5, color=canvas.GREY, ls="--", lw=1)
            ax.annotate(
                f"{step.relative:+.1%}",
                (step.index - 0.5, max(step.before, step.after)),
                textcoords="offset points",
                xytext=(4, 6),
                fontsize="small",
            )
    every = max(1, len(xs) // MAX_TICKS + (len(xs) % MAX_TICKS > 0))
    ax.set_xticks(
        xs[::every], [canvas.plain(p.label) for p in series.points][::every], rotation=45, ha="right"
    )
    ax.set_xlabel(
        "commit, in the order first recorded" if series.ordered_by == "commit" else "run, in time order"
    )
    ax.set_ylabel(canvas.axis_label(METRICS["samples_per_sec"]))
    canvas.tick_format(ax, METRICS["samples_per_sec"], "y")
    ax.grid(True, alpha=0.3)
    canvas.title(ax, series.title)
    if series.fit is not None:
        canvas.footnote(
            fig,
            f"red: fitted levels (penalised piecewise-constant fit); dashed: steps; noise between runs "
            f"{series.fit.sigma:.1%}",
        )
    return fig


def section(results: Sequence[Result]) -> str:
    """The report's History section: one figure per configuration with two points or more."""
    series = [with_steps(s) for s in build_series(results) if len(s.points) > 1]
    if not series:
        return note("No configuration has two points (runs at two commits, or two runs): no history to plot.")
    parts = []
    if len(series) > MAX_SERIES:
        parts.append(
            note(
                f"Showing the {MAX_SERIES} longest of {len(series)} series; filter the report to see others."
            )
        )
    for s in series[:MAX_SERIES]:
        steps = "; ".join(
            f"{st.relative:+.1%} before {s.points[st.index].label}" for st in (s.fit.steps if s.fit else [])
        )
        caption = f"{s.title}: {len(s.points)} points" + (f"; steps: {steps}" if steps else "; no steps")
        parts.append(
            f"<figure><figcaption>{e(caption)}</figcaption>"
            + plot(partial(history_figure, s), f"samples/s history, {s.title}")
            + "".join(note(n) for n in s.notes)
            + "</figure>"
        )
    return "".join(parts)
