"""Every serving metric over a run, under three definitions (flowrate.results.serving_metrics
says what each times), computed from the same raw traces."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flowrate.results.serving import RequestTrace
from flowrate.results.serving_metrics import DEFINITIONS, per_request
from flowrate.serving.stats import describe


@dataclass(frozen=True)
class Slo:
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def met(self, ttft_ms: float | None, tpot_ms: float | None, e2e_ms: float | None) -> bool:
        pairs = ((self.ttft_ms, ttft_ms), (self.tpot_ms, tpot_ms), (self.e2e_ms, e2e_ms))
        return all(limit is None or (value is not None and value <= limit) for limit, value in pairs)


def _duration_s(traces: list[RequestTrace], definition: str) -> float:
    done = [t for t in traces if t.ok]
    if not done:
        return 0.0
    if definition == "genai_perf":
        ends = [t.chunks[-1].t_s if t.chunks else t.end_s or 0.0 for t in done]
        return max(ends) - min(t.sent_s for t in traces)
    start = min(t.scheduled_s for t in traces)
    return max(t.end_s or 0.0 for t in done) - start


def summarize(traces: list[RequestTrace], definition: str, slo: Slo | None = None) -> dict[str, Any]:
    """One definition's figures: each latency described, throughputs, error rate, goodput."""
    done = [t for t in traces if t.ok]
    rows = per_request(traces, definition)
    duration = _duration_s(traces, definition)
    out: dict[str, Any] = {"duration_s": duration, "completed": len(done)}
    for name in ("ttft_ms", "tpot_ms", "e2e_ms"):
        out[name] = describe([value for r in rows if (value := r.latency(name)) is not None])
    out["itl_ms"] = describe([gap for r in rows for gap in r.itl_ms])
    n_out = sum(r.n_out for r in rows)
    n_in = sum(t.usage_prompt_tokens or t.prompt_tokens or 0 for t in done)
    rate = (lambda x: x / duration) if duration > 0 else (lambda x: None)
    out.update(
        request_throughput=rate(len(done)),
        output_token_throughput=rate(n_out),
        total_token_throughput=rate(n_out + n_in),
        output_tokens=n_out,
        input_tokens=n_in,
        error_rate=(len(traces) - len(done)) / len(traces) if traces else 0.0,
    )
    if slo is not None:
        good = sum(slo.met(r.ttft_ms, r.tpot_ms, r.e2e_ms) for r in rows)
        out["goodput"] = rate(good)
        out["slo_attainment"] = good / len(traces) if traces else None
    return out


def all_definitions(traces: list[RequestTrace], slo: Slo | None = None) -> dict[str, Any]:
    return {name: summarize(traces, name, slo) for name in DEFINITIONS}
