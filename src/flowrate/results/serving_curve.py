"""A sweep of loads' curve (flowrate serve-bench --rate R1,R2,… or --concurrency C1,C2,…): each
point's load and what its table and figure read of its serving section."""

from __future__ import annotations

from dataclasses import dataclass

from flowrate.results.serving import Serving

LATENCIES = ("ttft_ms", "tpot_ms", "e2e_ms")


@dataclass(frozen=True)
class Load:
    """One point's load: a rate (requests/s) or a concurrency, never both."""

    rate: float | None = None
    concurrency: int | None = None

    @property
    def label(self) -> str:
        return f"{self.rate:g} req/s" if self.rate is not None else f"concurrency {self.concurrency}"


@dataclass(frozen=True)
class Percentiles:
    p50: float | None  # ms; None: no request completed
    p99: float | None


@dataclass(frozen=True)
class CurvePoint:
    """What a sweep's table and figure read of one point (flowrate's definitions)."""

    load: Load
    cut: str | None  # why the point was cut (the Ctrl-C or --budget reason): partial, not drawn
    requests: int
    completed: int
    request_throughput: float | None  # achieved requests/s
    output_token_throughput: float | None
    latency_ms: dict[str, Percentiles]  # ttft_ms, tpot_ms, e2e_ms
    verdict: str | None  # --slo's: pass, fail, undecided

    @property
    def partial(self) -> bool:
        return self.cut is not None


def curve_point(load: Load, cut: str | None, verdict: str | None, section: Serving) -> CurvePoint:
    """One point of the curve, from its serving section's figures."""
    ours = section.figures()
    latency_ms = {}
    for key in LATENCIES:
        figures = ours.latency(key)
        latency_ms[key] = Percentiles(figures.median if figures else None, figures.p99 if figures else None)
    return CurvePoint(
        load=load,
        cut=cut,
        requests=section.requests or 0,
        completed=ours.completed or 0,
        request_throughput=ours.request_throughput,
        output_token_throughput=ours.output_token_throughput,
        latency_ms=latency_ms,
        verdict=verdict,
    )
