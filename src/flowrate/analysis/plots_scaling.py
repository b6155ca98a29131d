"""The weak-scaling figure: throughput against process count beside linear scaling, and efficiency."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from flowrate.analysis import canvas
from flowrate.results.scaling_report import ScalingReport


def scaling_figure(report: ScalingReport, title: str) -> Figure:
    """Throughput against processes beside linear scaling, and weak-scaling efficiency."""
    sizes = [p.processes for p in report.points]
    fig = canvas.new_figure()
    rate_ax, efficiency_ax = fig.subplots(1, 2)
    measured = [p.samples_per_sec for p in report.points]
    rate_ax.plot(sizes, measured, marker="o", label="measured (sum of ranks)")
    rate_ax.plot(
        sizes,
        [p.ideal_samples_per_sec for p in report.points],
        ls="--",
        color=canvas.GREY,
        label=f"linear from {report.baseline_processes} process(es)",
    )
    rate_ax.set_ylabel("samples/s")
    rate_ax.set_ylim(bottom=0)
    rate_ax.legend(fontsize="small", loc="upper left")
    efficiency_ax.plot(sizes, [p.efficiency for p in report.points], marker="o", color=canvas.FRONT_COLOUR)
    efficiency_ax.axhline(1.0, ls="--", color=canvas.GREY, lw=1)
    efficiency_ax.set_ylabel("weak-scaling efficiency")
    efficiency_ax.set_ylim(0, max(1.1, max(p.efficiency for p in report.points) * 1.05))
    efficiency_ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.0%}"))
    for ax in (rate_ax, efficiency_ax):
        ax.set_xlabel("processes (ranks)")
        ax.set_xticks(sizes)
        ax.set_xlim(0.5, max(sizes) + 0.5)
        ax.grid(True, alpha=0.3)
    fig.suptitle(canvas.plain(title), fontsize="medium")
    base = report.baseline_processes
    canvas.footnote(
        fig,
        f"the same batch per rank at every size; efficiency = (T(N) / N) / (T({base}) / {base}), "
        "T = samples/s summed over ranks",
    )
    return fig
