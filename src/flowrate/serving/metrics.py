"""Every serving metric under three definitions, computed from the same raw traces.

flowrate (this tool): tokens are placed at their chunk's arrival (a chunk carrying k tokens by
  the local tokenizer delivers k tokens at once; without a tokenizer each non-empty chunk counts
  as one). TTFT = first token's arrival - send; E2E = stream end - send; TPOT = (E2E - TTFT) /
  (n_out - 1) with n_out the server's usage.completion_tokens when sent, else the tokens counted;
  ITL = the gaps between consecutive tokens' arrivals, pooled over requests (0 inside a chunk).
  Duration: the run's start (first scheduled send) to the last stream's end.
vLLM (benchmarks/benchmark_serving.py, `vllm bench serve`: backend_request_func's
  async_request_openai_completions and calculate_metrics): TTFT = the first chunk with
  ``choices`` (even an empty text) - send; ITL = the gap between consecutive chunks, so per
  chunk, not per token (vllm#6531); latency = last chunk - send; TPOT = (latency - TTFT) /
  (output_len - 1) over requests with output_len > 1, output_len = usage.completion_tokens when
  sent, else the tokenizer's count of the generated text. Duration: benchmark start to the
  last response.
genai-perf / AIPerf (AIPerf metrics reference, docs.nvidia.com/aiperf: time_to_first_token,
  inter_token_latency, request_latency; NIM benchmarking "Metrics"): TTFT = first response with
  non-empty content - send (empty initial responses are disregarded); request_latency = last
  response - send; ITL = (request_latency - TTFT) / (output_token_count - 1) per request, i.e.
  what vLLM calls TPOT, with output_token_count the tokenizer's count of the output text (the
  server's usage when no tokenizer is given, as with --use-server-token-count). Duration: the
  first request's send to the last response.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from flowrate.serving.stats import describe
from flowrate.serving.trace import RequestTrace

DEFINITIONS = ("flowrate", "vllm", "genai_perf")
LATENCIES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")


@dataclass(frozen=True)
class Slo:
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def met(self, ttft_ms: float | None, tpot_ms: float | None, e2e_ms: float | None) -> bool:
        pairs = ((self.ttft_ms, ttft_ms), (self.tpot_ms, tpot_ms), (self.e2e_ms, e2e_ms))
        return all(limit is None or (value is not None and value <= limit) for limit, value in pairs)


def _arrivals(trace: RequestTrace) -> list[float]:
    times: list[float] = []
    for chunk in trace.chunks:
        if chunk.text:
            times.extend([chunk.t_s] * (1 if chunk.tokens is None else chunk.tokens))
    return times


def _counted(trace: RequestTrace) -> int | None:
    """The local tokenizer's count of the output, None without one."""
    if any(c.tokens is None for c in trace.chunks if c.text):
        return None
    return sum(c.tokens or 0 for c in trace.chunks)


def _per_request(trace: RequestTrace, definition: str) -> dict[str, Any]:
    """TTFT, TPOT, E2E (ms), ITL gaps (ms) and output tokens of one successful request."""
    ms, sent = 1000.0, trace.sent_s
    if definition == "flowrate":
        times = _arrivals(trace)
        n_out = trace.usage_completion_tokens or len(times)
        first, last = (times[0] if times else None), trace.end_s
        gaps = list(np.diff(times) * ms)
    elif definition == "vllm":
        times = [c.t_s for c in trace.chunks]
        n_out = trace.usage_completion_tokens or _counted(trace) or 0
        first, last = (times[0] if times else None), (times[-1] if times else None)
        gaps = list(np.diff(times) * ms)
    else:
        content = [c.t_s for c in trace.chunks if c.text]
        n_out = _counted(trace) or trace.usage_completion_tokens or 0
        first = content[0] if content else None
        last = trace.chunks[-1].t_s if trace.chunks else None
        gaps = []
    if first is None or last is None:
        return {"ttft_ms": None, "tpot_ms": None, "e2e_ms": None, "itl_ms": [], "n_out": n_out}
    ttft, e2e = (first - sent) * ms, (last - sent) * ms
    tpot = (e2e - ttft) / (n_out - 1) if n_out > 1 else None
    if definition == "genai_perf" and tpot is not None:
        gaps = [tpot]  # genai-perf's ITL is one figure per request
    return {"ttft_ms": ttft, "tpot_ms": tpot, "e2e_ms": e2e, "itl_ms": gaps, "n_out": n_out}


def per_request(traces: list[RequestTrace], definition: str) -> list[dict[str, Any]]:
    """Each successful request's TTFT, TPOT, E2E (ms), ITL gaps (ms) and output tokens."""
    return [_per_request(t, definition) for t in traces if t.ok]


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
        out[name] = describe([r[name] for r in rows if r[name] is not None])
    out["itl_ms"] = describe([gap for r in rows for gap in r["itl_ms"]])
    n_out = sum(r["n_out"] for r in rows)
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
        good = sum(slo.met(r["ttft_ms"], r["tpot_ms"], r["e2e_ms"]) for r in rows)
        out["goodput"] = rate(good)
        out["slo_attainment"] = good / len(traces) if traces else None
    return out


def all_definitions(traces: list[RequestTrace], slo: Slo | None = None) -> dict[str, Any]:
    return {name: summarize(traces, name, slo) for name in DEFINITIONS}
