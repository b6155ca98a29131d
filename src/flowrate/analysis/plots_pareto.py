"""The Pareto frontier as a scatter: every ranked run a point, the frontier highlighted; and the
oracle view (flowrate.analysis.oracle): each axis value's frontier in its own colour.

A ranking compares runs of one problem only (flowrate.analysis.pareto), so the scatter draws
each problem in a panel of its own, with its own scales: a frontier is read against its rivals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from flowrate.analysis import canvas
from flowrate.analysis.grouping import by_problem
from flowrate.analysis.oracle import AxisSlice, ConfigPoint, OracleView
from flowrate.analysis.pareto import Objective, ParetoResult
from flowrate.errors import FlowrateError
from flowrate.results.store import StoredRun


def pareto_scatter(result: ParetoResult, x: Objective | None = None, y: Objective | None = None) -> Figure:
    """Every ranked run as a point; the frontier highlighted and joined by its staircase; one
    panel per problem.

    ``x`` and ``y`` default to the result's first two objectives and must be among its objectives
    (a run's place on the frontier depends on all of them: with more than two, frontier points
    can look dominated in this projection, and the title says so).
    """
    x, y = _scatter_axes(result, x, y)
    heading = f"Pareto frontier: {x} against {y}"
    if len(result.objectives) > 2:
        heading += f"  (ranked on {len(result.objectives)} objectives)"
    on_front = {id(run) for run in result.front}
    problems = by_problem([*result.front, *result.dominated])
    fig = canvas.new_figure()
    for ax, (problem, runs) in zip(canvas.facets(fig, len(problems)), problems, strict=True):
        front = [r for r in runs if id(r) in on_front]
        dominated = [r for r in runs if id(r) not in on_front]
        _draw_panel(ax, result, (x, y), front, dominated)
        canvas.title(ax, heading if len(problems) == 1 else problem, canvas.columns_of(ax))
    if len(problems) > 1:
        canvas.heading(fig, f"{heading}: one panel per problem, each ranked on its own")
    return fig


def _draw_panel(
    ax: Axes,
    result: ParetoResult,
    axes: tuple[Objective, Objective],
    front: Sequence[StoredRun],
    dominated: Sequence[StoredRun],
) -> None:
    """One problem's runs on the two objectives ``axes``."""
    x, y = axes
    names = [o.name for o in result.objectives]
    xi, yi = names.index(x.name), names.index(y.name)

    def point(run: StoredRun) -> tuple[float, float]:
        vector = result.values[run.run_id]
        return vector[xi], vector[yi]

    if dominated:
        dx, dy = zip(*(point(r) for r in dominated), strict=True)
        ax.scatter(dx, dy, color=canvas.GREY, alpha=0.7, s=28, label=f"dominated ({len(dominated)})")
    _draw_front(ax, [(run, point(run)) for run in front], len(result.objectives) == 2, x.maximize)
    ax.set_xlabel(f"{canvas.axis_label(x.metric)}  ({'higher' if x.maximize else 'lower'} is better)")
    ax.set_ylabel(f"{canvas.axis_label(y.metric)}  ({'higher' if y.maximize else 'lower'} is better)")
    every = [point(r) for r in [*front, *dominated]]
    canvas.log_axis_if_wide(ax, [p[0] for p in every], "x")
    canvas.log_axis_if_wide(ax, [p[1] for p in every], "y")
    canvas.tick_format(ax, x.metric, "x")
    canvas.tick_format(ax, y.metric, "y")
    canvas.fit_panel(ax)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="best")


def _scatter_axes(
    result: ParetoResult, x: Objective | None, y: Objective | None
) -> tuple[Objective, Objective]:
    """The scatter's two objectives: the ones given, else the ranking's first two."""
    names = [o.name for o in result.objectives]
    x = x or result.objectives[0]
    if y is None:
        if len(result.objectives) < 2:
            raise FlowrateError(
                "a Pareto scatter needs two objectives; give --y (e.g. --y peak_memory_bytes)"
            )
        y = result.objectives[1]
    for axis in (x, y):
        if axis.name not in names:
            raise FlowrateError(
                f"{axis.metric.label} is not an objective of this ranking ({', '.join(names)})"
            )
    if x.name == y.name:
        raise FlowrateError("the x and y of a Pareto scatter must be different objectives")
    return x, y


def _draw_front(
    ax: Axes, front: Sequence[tuple[StoredRun, tuple[float, float]]], staircase: bool, maximize_x: bool
) -> None:
    """The frontier's points, labelled by batch size, joined by a staircase when ranked on two."""
    ordered = sorted((p for _, p in front), key=lambda p: (p[0], p[1]))
    fx, fy = [p[0] for p in ordered], [p[1] for p in ordered]
    if staircase and len(ordered) > 1:
        # the boundary of what the frontier dominates: vertical then horizontal when more x is
        # better (reach the next point's y at this x), horizontal then vertical when less is
        ax.step(fx, fy, where="pre" if maximize_x else "post", color=canvas.FRONT_COLOUR, alpha=0.6, lw=1.5)
    elif len(ordered) > 1:
        ax.plot(fx, fy, color=canvas.FRONT_COLOUR, alpha=0.4, lw=1, ls="--")
    ax.scatter(
        fx,
        fy,
        color=canvas.FRONT_COLOUR,
        s=46,
        zorder=3,
        edgecolor="black",
        lw=0.5,
        label=f"frontier ({len(front)})",
    )
    for run, (px, py) in front[:12]:  # label the frontier by batch size: what a user picks from
        ax.annotate(
            canvas.plain(f"b{run.batch_size}" if run.batch_size is not None else run.run_id[:6]),
            (px, py),
            textcoords="offset points",
            xytext=(5, 5),
            fontsize="x-small",
        )


def oracle_scatter(view: OracleView) -> Figure:
    """The oracle view on its first two objectives: each value of the axis in its own colour, its
    frontier joined (a staircase when ranked on two), each point with its 95% interval as error
    bars, the best on the first objective a star, the dominated hollow; one panel per problem."""
    if len(view.objectives) < 2:
        raise FlowrateError("the oracle plot needs two objectives, e.g. samples/s and peak memory")
    x, y = view.objectives[0], view.objectives[1]
    heading = f"Best configuration per {view.axis}: {x} against {y}"
    problems = sorted({s.problem for s in view.slices})
    colours = matplotlib.colormaps["tab10"]
    values = list(dict.fromkeys(str(s.value) for s in view.slices))  # one colour per value, in order
    fig = canvas.new_figure()
    for ax, problem in zip(canvas.facets(fig, len(problems)), problems, strict=True):
        drawn = [s for s in view.slices if s.problem == problem]
        for part in drawn:
            colour = colours(values.index(str(part.value)) % 10)
            _draw_slice(ax, view, part, colour)
        every = [p.estimates for s in drawn for p in [*s.front, *s.dominated]]
        canvas.log_axis_if_wide(ax, [e[0].value for e in every], "x")
        canvas.log_axis_if_wide(ax, [e[1].value for e in every], "y")
        ax.set_xlabel(f"{canvas.axis_label(x.metric)}  ({'higher' if x.maximize else 'lower'} is better)")
        ax.set_ylabel(f"{canvas.axis_label(y.metric)}  ({'higher' if y.maximize else 'lower'} is better)")
        canvas.tick_format(ax, x.metric, "x")
        canvas.tick_format(ax, y.metric, "y")
        canvas.fit_panel(ax)
        ax.grid(True, alpha=0.3)
        canvas.title(ax, heading if len(problems) == 1 else problem, canvas.columns_of(ax))
        canvas.legend(ax, len(drawn))
    if len(problems) > 1:
        canvas.heading(fig, f"{heading}: one panel per problem")
    canvas.footnote(
        fig, "bars: 95% intervals; star: best on the first objective; hollow: dominated beyond noise"
    )
    return fig


def _draw_slice(ax: Axes, view: OracleView, part: AxisSlice, colour: Any) -> None:
    """One axis value's configurations in one colour."""

    def xy(points: Sequence[ConfigPoint]) -> tuple[list[float], list[float], list[float], list[float]]:
        return (
            [p.estimates[0].value for p in points],
            [p.estimates[1].value for p in points],
            [p.estimates[0].half_width for p in points],
            [p.estimates[1].half_width for p in points],
        )

    ordered = sorted(part.front, key=lambda p: (p.estimates[0].value, p.estimates[1].value))
    fx, fy, fxe, fye = xy(ordered)
    label = canvas.plain(f"{view.axis}={part.value} ({len(part.front)} on its frontier)")
    ax.errorbar(fx, fy, xerr=fxe, yerr=fye, fmt="o", color=colour, ms=5, capsize=2, lw=0.8, label=label)
    if len(ordered) > 1:
        if len(view.objectives) == 2:  # as _draw_front's staircase
            ax.step(
                fx,
                fy,
                where="pre" if view.objectives[0].maximize else "post",
                color=colour,
                alpha=0.6,
                lw=1.2,
            )
        else:
            ax.plot(fx, fy, color=colour, alpha=0.4, lw=1, ls="--")
    best = part.best.estimates
    on_front = any(p is part.best for p in part.front)  # the best can be dominated: then hollow
    face, edge = (colour, "black") if on_front else ("white", colour)
    ax.scatter([best[0].value], [best[1].value], marker="*", s=160, color=face, edgecolor=edge, zorder=4)
    if part.dominated:
        dx, dy, _, _ = xy(part.dominated)
        ax.scatter(dx, dy, facecolors="none", edgecolors=colour, s=22, alpha=0.6, lw=0.8)
