"""Plots of recorded runs, drawn with matplotlib's Agg renderer into PNG or SVG.

Figures come from flowrate.results.metrics, the same table the CLI's listings and the Pareto
ranking read, so a plotted number means what it means elsewhere. Every figure is drawn on
flowrate.analysis.canvas (fixed size, text drawn literally); saving happens here, at the edge.
"""

from __future__ import annotations

import io
import math
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from flowrate.analysis import canvas
from flowrate.analysis.grouping import problem_of
from flowrate.errors import FlowrateError
from flowrate.io import write_atomic
from flowrate.measure.stats import summarize
from flowrate.results.identity import kind_of
from flowrate.results.metrics import METRICS, Metric
from flowrate.results.per_process import side_values
from flowrate.results.schema import Result
from flowrate.results.sections import Kind
from flowrate.results.store import StoredRun
from flowrate.units import si

FORMATS = ("png", "svg")

RunLike = StoredRun | Result


def _result(run: RunLike) -> Result:
    return run.result if isinstance(run, StoredRun) else run


# --- saving ----------------------------------------------------------------------------------------


def format_for(path: str | os.PathLike[str]) -> str:
    """'png' or 'svg' from the file's suffix; anything else is refused before any work is done."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise FlowrateError(f"cannot tell the image format of {os.fspath(path)!r}: name a .png or .svg file")
    return suffix


def render(fig: Figure, fmt: str = "png", dpi: int = canvas.DPI) -> bytes:
    """The figure as PNG or SVG bytes (fixed size: no tight bounding box, which would change it)."""
    if fmt not in FORMATS:
        raise FlowrateError(f"unknown image format {fmt!r}: use png or svg")
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=dpi, metadata=_metadata(fmt))
    return buffer.getvalue()


def _metadata(fmt: str) -> dict[str, str | None]:
    # no creation date in SVGs: the same runs give the same file
    return {"Date": None} if fmt == "svg" else {}


def save(fig: Figure, path: str | os.PathLike[str]) -> Path:
    """Write the figure to ``path`` as PNG or SVG by its suffix, atomically (temp file + rename)."""
    target = Path(path)
    data = render(fig, format_for(target))
    write_atomic(target, data)
    return target


# --- throughput (or any metric) against batch size --------------------------------------------------


@dataclass(frozen=True)
class _Series:
    parts: tuple[str, ...]  # problem/size, mode, precision, device
    points: list[tuple[int, float, float | None]]  # batch, value, half-width of the 95% CI


def _series_key(result: Result) -> tuple[str, ...]:
    return (
        problem_of(result),
        str(result.config.mode or "?"),
        str(result.config.precision or "?"),
        str(result.environment.device_name or result.environment.device_type or "?"),
    )


def _ci_half_width(result: Result) -> float | None:
    """Half the 95% CI of the mean interval rate: the run's own uncertainty, as a ± around its figure.

    The CI is of the mean interval rate, not of GlobalRate (the plotted figure), so it is drawn as
    a width around the point rather than as its two ends, which need not contain the point.
    """
    low, high = result.summary.ci95_low_samples_per_sec, result.summary.ci95_high_samples_per_sec
    if low is None or high is None:
        return None
    return (high - low) / 2


def throughput_vs_batch(runs: Sequence[RunLike], metric: str | Metric = "samples_per_sec") -> Figure:
    """The metric at each batch size: one line per (mode, precision, device), one panel per problem.

    Problems never share an axis (their figures differ a thousandfold for reasons that are not a
    trade-off): with several, each gets a panel with scales of its own (canvas.facets); a problem's
    generations get a panel of their own (grouping.problem_of). Serving runs, which have no batch
    size, and runs without the metric are left out; the x axis is log2 (batch sizes are usually
    powers of two).
    Error bars are each run's 95% CI half-width, for samples/s only (the one figure with a per-run
    CI). What a panel's lines share goes in its title, what tells them apart in its legend.
    """
    m = METRICS[metric] if isinstance(metric, str) else metric
    series = _series(runs, m)
    if not series:
        if m.name == "samples_per_joule":
            raise FlowrateError(
                "no run records samples/J: energy needs NVML (NVIDIA GPUs) or RAPL (Intel/AMD CPUs "
                "with /sys/class/powercap readable); runs without a meter have none"
            )
        raise FlowrateError(f"no run records {m.label}: nothing to plot")
    problems = sorted({key[0] for key in series})
    what = f"{m.label} against batch size"
    fig = canvas.new_figure()
    for ax, problem in zip(canvas.facets(fig, len(problems)), problems, strict=True):
        lines = [_Series(key, sorted(points)) for key, points in sorted(series.items()) if key[0] == problem]
        _draw_panel(ax, lines, m, what if len(problems) == 1 else None)
    if len(problems) > 1:
        canvas.heading(fig, f"{what}: one panel per problem, each on its own scale")
    if m.name == "samples_per_sec" and any(ci is not None for points in series.values() for *_, ci in points):
        canvas.footnote(
            fig, "samples/s is GlobalRate; error bars: ± half the 95% CI of the mean interval rate"
        )
    return fig


def _series(
    runs: Sequence[RunLike], m: Metric
) -> dict[tuple[str, ...], list[tuple[int, float, float | None]]]:
    """(batch, value, CI half-width) of each run that records the metric, by its series key."""
    series: dict[tuple[str, ...], list[tuple[int, float, float | None]]] = {}
    for run in runs:
        result = _result(run)
        if kind_of(result) is Kind.SERVE:  # no batch size: drawn against its load (plots_serving)
            continue
        value = m.value(result)
        if value is None or not math.isfinite(value):
            continue
        ci = _ci_half_width(result) if m.name == "samples_per_sec" else None
        series.setdefault(_series_key(result), []).append((result.batch_size, float(value), ci))
    return series


def _draw_panel(ax: Axes, lines: Sequence[_Series], m: Metric, what: str | None) -> None:
    """One problem's lines; its title says what they share (``what`` first, when it is the only panel)."""
    varying = [i for i in range(4) if len({s.parts[i] for s in lines}) > 1]
    shared = "  ".join(lines[0].parts[i] for i in range(4) if i not in varying)  # the problem at least
    for line in lines:
        label = "  ".join(line.parts[i] for i in varying) or "  ".join(line.parts)
        _draw_series(ax, line, canvas.plain(label))
    ax.set_xscale("log", base=2)
    batches = sorted({b for line in lines for b, _, _ in line.points})
    ax.set_xticks(batches)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    if len(batches) == 1:
        ax.set_xlim(batches[0] / 2, batches[0] * 2)
    # devices can differ a thousandfold on one problem: a log axis keeps each line readable
    canvas.log_axis_if_wide(ax, [v for line in lines for _, v, _ in line.points], "y")
    ax.set_xlabel("batch size (samples per step)")
    ax.set_ylabel(canvas.axis_label(m))
    canvas.tick_format(ax, m, "y")
    canvas.title(ax, f"{what}: {shared}" if what else shared, canvas.columns_of(ax))
    canvas.fit_panel(ax)
    ax.grid(True, which="major", alpha=0.3)
    canvas.legend(ax, len(lines))


def _draw_series(ax: Axes, line: _Series, label: str) -> None:
    by_batch: dict[int, list[float]] = {}
    for batch, value, _ in line.points:
        by_batch.setdefault(batch, []).append(value)
    xs = sorted(by_batch)
    (drawn,) = ax.plot(xs, [statistics.fmean(by_batch[x]) for x in xs], marker="o", label=label)
    errors = [(b, v, ci) for b, v, ci in line.points if ci is not None]
    if errors:
        ax.errorbar(
            [b for b, _, _ in errors],
            [v for _, v, _ in errors],
            yerr=[[min(ci, v) for _, v, ci in errors], [ci for _, _, ci in errors]],
            fmt="none",
            ecolor=drawn.get_color(),
            capsize=3,
            alpha=0.7,
        )
    repeated = [(b, v) for b, v, _ in line.points if len(by_batch[b]) > 1]
    if repeated:  # several runs at one batch size: the line goes through their mean, each is shown
        ax.scatter(
            [b for b, _ in repeated], [v for _, v in repeated], s=12, color=drawn.get_color(), alpha=0.6
        )


def samples_per_joule_vs_batch(runs: Sequence[RunLike]) -> Figure:
    """Energy efficiency against batch size; runs without an energy reading are left out."""
    return throughput_vs_batch(runs, "samples_per_joule")


# --- one run over time ------------------------------------------------------------------------------


def rate_over_time(run: RunLike) -> Figure:
    """Rate (smoothed) and GlobalRate at each sample point, and each interval's local rate.

    Checkpoint intervals are shaded: GlobalRate dips through them and Rate may spike after them,
    which is the run behaving as measured, not noise. A run of one sample point has no lines to
    draw: its readings are drawn as marks, one shape each (they often coincide), and a note says so.
    """
    result = _result(run)
    compute = [i for i in result.intervals if i.kind == "compute"]
    if not compute:
        raise FlowrateError(f"run {result.run_id} recorded no intervals: nothing to plot over time")
    one = len(result.intervals) == 1
    fig = canvas.new_figure()
    ax = fig.add_subplot()
    ax.plot(
        [i.elapsed_s for i in compute],
        [i.samples_per_sec for i in compute],
        color=canvas.GREY,
        lw=0.8,
        marker="o" if one else ".",
        ms=5 if one else 4,
        label="interval (local)",
    )
    # Rate and GlobalRate are read at every sample point, checkpoints included (GlobalRate dips)
    every = [i.elapsed_s for i in result.intervals]
    for values, label, mark, size in (
        ([i.rate_samples_per_sec for i in result.intervals], "Rate (smoothed)", "D", 10),
        ([i.global_samples_per_sec for i in result.intervals], "GlobalRate", "s", 15),
    ):
        ax.plot(
            every, values, lw=1.8, label=label, marker=mark if one else None, ms=size, mfc="none", mew=1.8
        )
    if one:
        canvas.footnote(
            fig, "one sample point: each reading is a mark, not a line; a longer run draws curves"
        )
    _shade_checkpoints(ax, result)
    _time_frame(ax, result)
    key = "  ".join(_series_key(result))
    canvas.title(ax, f"Rate and GlobalRate, run {result.run_id}: {key}  batch {result.batch_size}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="best")
    return fig


def _shade_checkpoints(ax: Axes, result: Result) -> None:
    checkpoints = [i for i in result.intervals if i.kind == "checkpoint"]
    for n, interval in enumerate(checkpoints):
        ax.axvspan(
            interval.elapsed_s - interval.seconds,
            interval.elapsed_s,
            color="#ff7f0e",
            alpha=0.18,
            lw=0,
            label="checkpoint" if n == 0 else None,
        )


def _time_frame(ax: Axes, result: Result) -> None:
    """Axes from 0, so a steady run looks steady, with room past the last reading and above the
    top one, which would hide in the frame."""
    ax.set_xlabel("time since the clock started (s)")
    ax.set_ylabel("samples/s")
    readings = [
        v
        for i in result.intervals
        for v in (i.samples_per_sec, i.rate_samples_per_sec, i.global_samples_per_sec)
        if math.isfinite(v)
    ]
    top = max(readings, default=0.0)
    ax.set_ylim(0, top * 1.08 if top > 0 else 1.0)
    last = max(i.elapsed_s for i in result.intervals)
    ax.set_xlim(0, last * 1.1 if last > 0 else None)


# --- groups of runs side by side --------------------------------------------------------------------


@dataclass(frozen=True)
class Bar:
    label: str
    n: int  # processes (runs, or each repeat of a --repeat run); intervals where ``within_run``
    mean: float
    ci95_low: float | None
    ci95_high: float | None
    within_run: bool = False  # one process: the CI of its own intervals (its stability only)


def bar_statistics(groups: Sequence[tuple[str, Sequence[RunLike]]], metric: str | Metric) -> list[Bar]:
    """Each group's mean and 95% CI of the metric, with the process as the unit.

    Each process contributes one value (flowrate.results.per_process, as `flowrate compare`
    counts them) and the CI is Student's t over those values: intervals of one process share its
    offset, so pooling them would draw a CI far narrower than the differences between runs. A
    group of one process shows the CI of its own intervals, marked ``within_run``: how steady the
    run was, not how far another run would land. A group without any value is an error naming it:
    silently dropping a bar would change the comparison.
    """
    m = METRICS[metric] if isinstance(metric, str) else metric
    bars = []
    for label, runs in groups:
        results = [_result(r) for r in runs]
        values = [v for v in side_values(m, results) if math.isfinite(v)]
        if not values:
            raise FlowrateError(f"{label!r} records no {m.label}: nothing to compare")
        intervals = [v for v in m.interval_values(results[0]) if math.isfinite(v)] if len(values) == 1 else []
        if len(intervals) > 1:
            s = summarize(intervals)
            bars.append(Bar(label, s.n, values[0], s.ci95_low, s.ci95_high, within_run=True))
            continue
        s = summarize(values)
        bars.append(Bar(label, s.n, s.mean, s.ci95_low, s.ci95_high))
    return bars


def comparison_bars(
    groups: Sequence[tuple[str, Sequence[RunLike]]], metric: str | Metric = "samples_per_sec"
) -> Figure:
    """One bar per group: the mean over its processes, with 95% CI error bars (bar_statistics)."""
    m = METRICS[metric] if isinstance(metric, str) else metric
    if not groups:
        raise FlowrateError("nothing to compare: give at least one run or tag")
    bars = bar_statistics(groups, m)
    fig = canvas.new_figure()
    ax = fig.add_subplot()
    positions = list(range(len(bars)))
    lower = [b.mean - b.ci95_low if b.ci95_low is not None else 0.0 for b in bars]
    upper = [b.ci95_high - b.mean if b.ci95_high is not None else 0.0 for b in bars]
    ax.bar(positions, [b.mean for b in bars], color="#4c78a8", width=0.6)
    for x, bar, below, above in zip(positions, bars, lower, upper, strict=True):
        colour = "grey" if bar.within_run else "black"  # a run's own steadiness, not a comparison's CI
        ax.errorbar([x], [bar.mean], yerr=[[below], [above]], fmt="none", ecolor=colour, capsize=6)
    ax.set_xticks(
        positions,
        [canvas.plain(b.label) for b in bars],
        rotation=20 if len(bars) > 4 else 0,
        ha="right" if len(bars) > 4 else "center",
    )
    for x, bar in zip(positions, bars, strict=True):
        ax.annotate(
            f"{si(bar.mean, digits=4)}\n" + (f"1 run, {bar.n} intervals" if bar.within_run else f"n={bar.n}"),
            (x, bar.mean),
            textcoords="offset points",
            xytext=(10, 2),
            ha="left",
            va="bottom",
            fontsize="x-small",
        )
    ax.set_ylabel(canvas.axis_label(m))
    canvas.tick_format(ax, m, "y")
    ax.set_ylim(bottom=0)
    canvas.title(ax, f"{m.label}: mean with 95% CI")
    ax.grid(True, axis="y", alpha=0.3)
    canvas.footnote(
        fig,
        "n = processes per group (one value each); grey: one run, the CI of its own intervals "
        "(its steadiness, not a comparison's); no error bar where n = 1",
    )
    return fig
