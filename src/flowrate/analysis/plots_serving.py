"""serve-bench's figure: latency CDFs from the raw trace, the inter-token latency under each
tool's definition, and (after --find-max-rate) p99 latency against the offered rate."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from flowrate.analysis import canvas
from flowrate.serving.metrics import DEFINITIONS, per_request
from flowrate.serving.trace import RequestTrace

TITLES = {
    "flowrate": "flowrate (per token)",
    "vllm": "vLLM (per chunk)",
    "genai_perf": "genai-perf (per request)",
}


def _cdf(ax: Axes, values: list[float], label: str) -> None:
    if values:
        data = np.sort(values)
        ax.step(data, np.arange(1, len(data) + 1) / len(data), where="post", label=label)


def serving_figure(section: dict[str, Any], title: str) -> Figure:
    traces = [RequestTrace.from_dict(t) for t in section["traces"]]
    search = section.get("search")
    fig = canvas.new_figure()
    axes = fig.subplots(1, 3 if search else 2)
    ours = per_request(traces, "flowrate")
    for key, label in (("ttft_ms", "TTFT"), ("e2e_ms", "E2E")):
        _cdf(axes[0], [r[key] for r in ours if r[key] is not None], label)
    axes[0].set_xlabel("ms (flowrate's definitions)")
    for name in DEFINITIONS:
        _cdf(axes[1], [gap for r in per_request(traces, name) for gap in r["itl_ms"]], TITLES[name])
    axes[1].set_xlabel("inter-token latency, ms")
    for ax in axes[:2]:
        ax.set_ylabel("fraction of requests (ITL: of gaps)")
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", loc="lower right")
    if search:
        _search_panel(axes[2], search, section.get("slo") or {})
    fig.suptitle(canvas.plain(title), fontsize="medium")
    canvas.footnote(fig, f"{len(traces)} requests; failed ones are left out of the curves")
    return fig


def _search_panel(ax: Axes, search: dict[str, Any], slo: dict[str, float]) -> None:
    points = sorted(search["points"], key=lambda p: p["rate"])
    for key, limit in slo.items():
        ax.plot(
            [p["rate"] for p in points],
            [p["p99"].get(key, np.nan) for p in points],
            marker="o",
            label=f"p99 {key}",
        )
        ax.axhline(limit, ls="--", color=canvas.GREY, lw=1)
    if search.get("max_rate") is not None:
        ax.axvline(search["max_rate"], color=canvas.FRONT_COLOUR, lw=1, label="max rate meeting the SLO")
    ax.set_xlabel("offered rate, requests/s")
    ax.set_ylabel("ms")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
