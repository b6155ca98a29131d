"""Each request's latencies under three definitions, computed from the same raw traces (the
figures over a run are flowrate.serving.metrics's).

One count per token: every definition reads the request's one output count n (``output_tokens``,
chosen and placed on its chunks by serving.usage and serving.tokens), so they differ only in
which arrivals they time, never in what they count.

flowrate (this tool): each token arrives with the chunk it is placed on (the last one with the
  stream's last chunk). TTFT = the first token's arrival - send; E2E = the last token's arrival,
  i.e. the last chunk with ``choices``, - send; ITL per token: the tokens of a
  chunk share the gap since the previous token's chunk evenly (k tokens after a gap g: k gaps of
  g / k), and a first chunk's extra tokens came with the first (gaps of 0), so a request has
  n - 1 gaps summing to E2E - TTFT, pooled over requests; TPOT = (E2E - TTFT) / (n - 1), the mean
  of the request's ITL. Duration: the run's start (first scheduled send) to the last stream's end.
vLLM (benchmarks/benchmark_serving.py, `vllm bench serve`: backend_request_func's
  async_request_openai_completions and calculate_metrics): TTFT = the first chunk with
  ``choices`` (even an empty text) - send; ITL = the gap between consecutive chunks, so per
  chunk: per token only when each chunk carries one (vllm#6531); latency = last chunk - send;
  TPOT = (latency - TTFT) / (n - 1) over requests with n > 1 (vLLM's output_len: usage when
  sent, else its tokenizer's count of the text). A request's mean ITL is
  (latency - TTFT) / (chunks - 1). Duration: benchmark start to the last response.
genai-perf / AIPerf (AIPerf metrics reference, docs.nvidia.com/aiperf: time_to_first_token,
  inter_token_latency, request_latency; NIM benchmarking "Metrics"): TTFT = first response with
  non-empty content - send (empty initial responses are disregarded); request_latency = last
  response - send; ITL = (request_latency - TTFT) / (n - 1) per request, i.e. what vLLM calls
  TPOT (AIPerf's output_token_count: its tokenizer's count of the output text, or the server's
  usage with --use-server-token-count). Duration: the first request's send to the last response.

So under each definition a request's mean ITL is (E2E - TTFT) / (n - 1) with E2E and TTFT its own
and n counted alike: the tokens for flowrate and genai-perf, the chunks for vLLM, whose TPOT uses
the tokens and equals its mean ITL when every chunk carries one token.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from flowrate.results.serving import RequestTrace

DEFINITIONS = ("flowrate", "vllm", "genai_perf")


def apportion(weights: list[int], n: int) -> list[int]:
    """n tokens over chunks of these weights (flowrate.serving.tokens's rule); all on the chunks
    with weight. Weights that are all 0 place nothing: the caller's n is then 0."""
    total = sum(weights)
    if total == 0:
        return [0] * len(weights)
    placed, before, so_far = [], 0, 0
    for weight in weights:
        so_far += weight
        arrived = -(-n * so_far // total)  # ceil, in integers
        placed.append(arrived - before)
        before = arrived
    return placed


def place(weights: list[int], n: int) -> list[int]:
    """n tokens on chunks of these weights, the last one on the last chunk (flowrate.serving.tokens's
    rule)."""
    placed = apportion(weights, n)
    if n >= 2 and placed and placed[-1] == 0:
        donor = max(i for i, k in enumerate(placed) if k > 0)
        placed[donor] -= 1
        placed[-1] = 1
    return placed


def placed(trace: RequestTrace) -> list[int]:
    """The output tokens each chunk carried. A trace recorded before the count was settled
    (no output_tokens) is settled here the same way: the usage it kept, else its chunks' counts."""
    if trace.output_tokens is not None:
        return [c.tokens or 0 for c in trace.chunks]
    weights = [c.tokens if c.tokens is not None else int(bool(c.text)) for c in trace.chunks]
    return place(weights, trace.usage_completion_tokens or sum(weights))


def _token_gaps(arrivals: list[tuple[float, int]]) -> list[float]:
    """Per-token gaps (s) of chunks arriving at t with k tokens each (k > 0)."""
    gaps = [0.0] * (arrivals[0][1] - 1)
    for (before, _), (t, k) in pairwise(arrivals):
        gaps.extend([(t - before) / k] * k)
    return gaps


@dataclass(frozen=True)
class RequestLatencies:
    """One successful request under one definition: TTFT, TPOT and E2E (ms; None where the
    definition finds no token), its inter-token gaps (ms) and its output tokens."""

    ttft_ms: float | None
    tpot_ms: float | None
    e2e_ms: float | None
    itl_ms: list[float]
    n_out: int

    def latency(self, name: str) -> float | None:
        """ttft_ms, tpot_ms or e2e_ms by name (an SLO's keys)."""
        value: float | None = getattr(self, name) if name in _ONE_FIGURE else None
        return value


_ONE_FIGURE = frozenset({"ttft_ms", "tpot_ms", "e2e_ms"})


def _per_request(trace: RequestTrace, definition: str) -> RequestLatencies:
    """TTFT, TPOT, E2E (ms), ITL gaps (ms) and output tokens of one successful request."""
    ms, sent = 1000.0, trace.sent_s
    counts = placed(trace)
    n_out = sum(counts)
    if definition == "flowrate":
        arrivals = [(c.t_s, k) for c, k in zip(trace.chunks, counts, strict=True) if k > 0]
        first = arrivals[0][0] if arrivals else None
        last = arrivals[-1][0] if arrivals else None
        gaps = [g * ms for g in _token_gaps(arrivals)] if arrivals else []
    elif definition == "vllm":
        times = [c.t_s for c in trace.chunks]
        first, last = (times[0] if times else None), (times[-1] if times else None)
        gaps = list(np.diff(times) * ms)
    else:
        content = [c.t_s for c in trace.chunks if c.text]
        first = content[0] if content else None
        last = trace.chunks[-1].t_s if trace.chunks else None
        gaps = []
    if first is None or last is None:
        return RequestLatencies(None, None, None, [], n_out)
    ttft, e2e = (first - sent) * ms, (last - sent) * ms
    tpot = (e2e - ttft) / (n_out - 1) if n_out > 1 else None
    if definition == "genai_perf" and tpot is not None:
        gaps = [tpot]  # genai-perf's ITL is one figure per request
    return RequestLatencies(ttft, tpot, e2e, [float(g) for g in gaps], n_out)


def per_request(traces: list[RequestTrace], definition: str) -> list[RequestLatencies]:
    """Each successful request's TTFT, TPOT, E2E (ms), ITL gaps (ms) and output tokens."""
    return [_per_request(t, definition) for t in traces if t.ok]
