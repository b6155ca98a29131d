"""The report's Estimate section: predicted ÷ measured samples/s for every run, over time, one
figure per machine, and its table, so a cost model that drifts (or a machine that does) shows."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from matplotlib.figure import Figure

from flowrate.analysis import canvas
from flowrate.analysis.estimate_drift import MachineDrift, Pricer, drift
from flowrate.analysis.html import e, note, plot, table, when
from flowrate.results.store import StoredRun
from flowrate.units import rate

MAX_MACHINES = 6  # figures in the section before it says how many it left out
BAND = 0.3  # the ±30% band an estimate is held to
WIDE = 4.0  # ratios spanning more than this factor are drawn on a log axis


def drift_figure(group: MachineDrift) -> Figure:
    """One marker per run with a prediction, in time order; the ±30% band and the line at 1."""
    fig = canvas.new_figure()
    ax = fig.subplots()
    points = [p for p in group.points if p.ratio is not None]
    xs = list(range(len(points)))
    recorded = [(x, p.ratio) for x, p in zip(xs, points, strict=True) if p.source == "recorded"]
    recomputed = [(x, p.ratio) for x, p in zip(xs, points, strict=True) if p.source != "recorded"]
    ax.axhspan(1 - BAND, 1 + BAND, color=canvas.GREY, alpha=0.15, lw=0)
    ax.axhline(1.0, color=canvas.GREY, lw=1)
    if recorded:
        ax.plot(*zip(*recorded, strict=True), "o", label="recorded with the run", zorder=3)
    if recomputed:
        ax.plot(*zip(*recomputed, strict=True), "s", mfc="none", label="recomputed afterwards", zorder=3)
    ax.plot(xs, [p.ratio or 0.0 for p in points], color=canvas.GREY, lw=0.8, zorder=2)  # none is None
    labels = [f"{when(p.created_at, zone=False)}\n{p.configuration}" for p in points]
    every = max(1, -(-len(xs) // 10))
    ax.set_xticks(xs[::every], [canvas.plain(label) for label in labels][::every], rotation=45, ha="right")
    ax.tick_params(axis="x", labelsize="x-small")
    ax.set_xlabel("run, in time order")
    ax.set_ylabel("predicted ÷ measured samples/s")
    ratios = [p.ratio or 1.0 for p in points]
    if max(ratios) / min(ratios) > WIDE:  # a ratio is a factor: ten times off is as far as a tenth
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    canvas.title(ax, group.label)
    canvas.legend(ax, int(bool(recorded)) + int(bool(recomputed)))
    canvas.footnote(fig, f"grey band: within ±{BAND:.0%}; {group.summary()}")
    return fig


def section(runs: Sequence[StoredRun], recompute: Pricer | None = None) -> str:
    """The section: per machine, the figure and a table of every run (oldest first). Runs that
    recorded no prediction are priced by ``recompute`` (`flowrate report` passes the one that
    uses their machine's calibration, flowrate.estimate.reprice); without it they have none."""
    groups = drift(runs, recompute)
    if not any(g.ratios for g in groups):
        return note(
            "No run has a prediction: runs record one where their device has rates (a GPU in the "
            "peak table, or a device calibrated with `flowrate estimate --calibrate`)."
        )
    parts = []
    if len(groups) > MAX_MACHINES:
        parts.append(
            note(f"Showing {MAX_MACHINES} of {len(groups)} machines; filter the report to see others.")
        )
    for group in groups[:MAX_MACHINES]:
        rows = [
            [
                e(when(p.created_at)),
                f'<a href="#run-{e(p.run_id)}"><code>{e(p.run_id[:8])}</code></a>',
                e(p.configuration),
                e(rate(p.predicted)),
                e(rate(p.measured)),
                e(f"{p.ratio:.2f}" if p.ratio is not None else "—"),
                e(p.source + (f" [{p.cost_model}]" if p.cost_model and p.ratio is not None else "")),
            ]
            for p in group.points
        ]
        header = ("recorded", "run", "configuration", "predicted", "measured", "ratio", "prediction")
        parts.append(
            f"<figure><figcaption>{e(group.label)}: {e(group.summary())}</figcaption>"
            + (
                plot(partial(drift_figure, group), f"predicted ÷ measured, {group.label}")
                if group.ratios
                else ""
            )
            + table(header, rows, numeric=(3, 4, 5))
            + "</figure>"
        )
    return "".join(parts)
