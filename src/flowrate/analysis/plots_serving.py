"""serve-bench's figure: latency CDFs from the raw trace, the inter-token latency under each
tool's definition, and (after --find-max-rate) the latency–throughput curve with the SLO's lines;
`flowrate plot serving` and the report's Serving section draw it from a stored run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from flowrate.analysis import canvas
from flowrate.analysis.html import e, note, plot
from flowrate.errors import FlowrateError
from flowrate.results.identity import load_label
from flowrate.results.schema import Result
from flowrate.results.serving import Serving
from flowrate.results.serving_curve import LATENCIES, CurvePoint
from flowrate.results.serving_metrics import DEFINITIONS, per_request
from flowrate.results.serving_search import Bounded, RateSearch, SearchPoint

TITLES = {
    "flowrate": "flowrate (per token)",
    "vllm": "vLLM (per chunk)",
    "genai_perf": "genai-perf (per request)",
}


def _cdf(ax: Axes, values: list[float], label: str) -> None:
    if values:
        data = np.sort(values)
        ax.step(data, np.arange(1, len(data) + 1) / len(data), where="post", label=label)


def serving_figure(section: Serving, title: str) -> Figure:
    traces = section.measured_traces
    search = section.search
    fig = canvas.new_figure()
    axes = fig.subplots(1, 3 if search is not None else 2)
    ours = per_request(traces, "flowrate")
    for key, label in (("ttft_ms", "TTFT"), ("e2e_ms", "E2E")):
        _cdf(axes[0], [value for r in ours if (value := r.latency(key)) is not None], label)
    axes[0].set_xlabel("ms (flowrate's definitions)")
    for name in DEFINITIONS:
        _cdf(axes[1], [gap for r in per_request(traces, name) for gap in r.itl_ms], TITLES[name])
    axes[1].set_xlabel("inter-token latency, ms")
    for ax in axes[:2]:
        ax.set_ylabel("fraction of requests (ITL: of gaps)")
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", loc="lower right")
    if search is not None:
        _search_panel(axes[2], search, section.slo or {})
    fig.suptitle(canvas.plain(title), fontsize="medium")
    canvas.footnote(fig, f"{len(traces)} requests; failed ones are left out of the curves")
    return fig


def _title(result: Result) -> str:
    """The server's model and the load its figures were measured under, and the run."""
    return f"{result.problem.name}, {load_label(result)}, run {result.run_id}"


def run_figure(result: Result) -> Figure:
    """The serving figure of a stored serve-bench run."""
    if result.serving is None:
        raise FlowrateError(f"run {result.run_id} is not a serve-bench run: it has no serving figures")
    if result.serving.mistyped:
        why = ", ".join(result.serving.mistyped)
        raise FlowrateError(f"run {result.run_id}'s serving section is malformed ({why})")
    try:
        return serving_figure(result.serving, _title(result))
    except (KeyError, TypeError, ValueError, AttributeError) as why:  # a hand-edited record
        raise FlowrateError(f"run {result.run_id}'s serving section is malformed ({why!r})") from None


def section(results: Sequence[Result]) -> str:
    """The report's Serving section: one figure per serve-bench run."""
    serving = [r for r in results if r.serving is not None]
    if not serving:
        return note("No serve-bench runs: no latency distributions to plot.")
    return "".join(
        f"<figure><figcaption>{e(_title(r))}</figcaption>"
        + plot(partial(run_figure, r), f"serving latencies, {_title(r)}")
        + "</figure>"
        for r in serving
    )


def search_curve(search: RateSearch, key: str) -> list[tuple[float, float, float | None]]:
    """The latency–throughput curve of one SLO'd latency: (achieved requests/s, percentile ms,
    its upper bound ms or None) of each point measured whole, by throughput. A cut (partial) point
    or a percentile a failed request set (None) is not drawn. A search stored with p99s only
    gives (offered rate, p99, None)."""
    out = []
    for point in search.points:
        if point.partial:
            continue
        if point.latency_ms is not None:
            figures = point.latency_ms.get(key) or Bounded()
            x, y, upper = point.request_throughput, figures.quantile, figures.upper
        else:
            x, y, upper = point.rate, (point.p99 or {}).get(key), None
        if x is not None and y is not None:
            out.append((float(x), float(y), upper))
    return sorted(out)


def sweep_figure(curve: list[CurvePoint], slo: dict[str, float], title: str) -> Figure:
    """A sweep's latency–throughput curves, drawn as the rate search's are: p50 on the left, p99
    on the right with --slo's lines; a cut point is not drawn."""
    fig = canvas.new_figure()
    axes = fig.subplots(1, 2)
    for ax, name in zip(axes, ("p50", "p99"), strict=True):
        points = [
            SearchPoint(
                rate=p.load.rate,
                partial=p.partial,
                request_throughput=p.request_throughput,
                latency_ms={
                    key: Bounded(quantile=getattr(figures, name)) for key, figures in p.latency_ms.items()
                },
            )
            for p in curve
        ]
        limits = {key: slo.get(key) if name == "p99" else None for key in LATENCIES}
        _search_panel(ax, RateSearch(points=points, percentile=float(name[1:])), limits)
    fig.suptitle(canvas.plain(title), fontsize="medium")
    loads = ", ".join(p.load.label for p in curve)
    canvas.footnote(fig, f"one point a load ({loads}); failed requests are left out of the percentiles")
    return fig


def _search_panel(ax: Axes, search: RateSearch, slo: Mapping[str, float | None]) -> None:
    """The curve of each key of ``slo`` (its limit's line where one is given) against achieved
    requests/s."""
    name, bars = f"p{99 if search.percentile is None else search.percentile:g}", False
    for key, limit in slo.items():
        curve = search_curve(search, key)
        line = ax.plot([c[0] for c in curve], [c[1] for c in curve], marker="o", label=f"{name} {key}")[0]
        bounded = [(x, y, upper) for x, y, upper in curve if upper is not None]
        if bounded:
            bars = True
            ax.vlines(
                [c[0] for c in bounded],
                [c[1] for c in bounded],
                [c[2] for c in bounded],
                color=line.get_color(),
                lw=1,
                alpha=0.6,
            )
        if limit is not None:
            ax.axhline(limit, ls="--", color=line.get_color(), lw=1, label=f"SLO {key} {limit:g} ms")
    best = search.headline_point
    if search.max_rate is not None and best is not None:
        achieved = search.points[best].request_throughput
        if achieved is not None:
            ax.axvline(
                achieved, color=canvas.FRONT_COLOUR, lw=1, label=f"max rate {search.max_rate:.4g} req/s"
            )
    cut = sum(bool(p.partial) for p in search.points)
    ax.set_xlabel("achieved requests/s" + (f" ({cut} cut point not drawn)" if cut else ""))
    ax.set_ylabel(f"{name} latency, ms" + (" (bar: its upper bound)" if bars else ""))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
