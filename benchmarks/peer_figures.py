"""serve_peers.py's pure parts: each tool's JSON output read into the same five figures, flowrate's
own traces re-read under each peer's definitions, and the ratio/verdict logic.

The five figures: request rate (requests/s), output tokens/s, and the medians over requests of
TTFT, TPOT (a request's mean gap per output token after the first: (E2E - TTFT) / (n - 1)) and
E2E latency, in ms.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

from flowrate.results.serving import RequestTrace
from flowrate.results.serving_metrics import per_request
from flowrate.serving.metrics import summarize

FIGURES = ("request_rate", "output_tokens_per_s", "ttft_ms", "tpot_ms", "e2e_ms")
AGREE = 0.10  # flowrate ÷ peer within 10%
REREAD = 0.03  # flowrate's trace under the peer's definition ÷ peer within 3%


@dataclass(frozen=True)
class Figures:
    request_rate: float
    output_tokens_per_s: float
    ttft_ms: float
    tpot_ms: float
    e2e_ms: float

    def get(self, name: str) -> float:
        return float(getattr(self, name))

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def median_of(rounds: list[Figures]) -> Figures:
    """Each figure's median over rounds."""
    return Figures(**{name: statistics.median(r.get(name) for r in rounds) for name in FIGURES})


# --- each tool's output -------------------------------------------------------------------------


def read_flowrate(record: dict[str, Any]) -> Figures:
    """`flowrate serve-bench --out` under flowrate's own definitions."""
    m = record["serving"]["metrics"]["flowrate"]
    return Figures(
        request_rate=m["request_throughput"],
        output_tokens_per_s=m["output_token_throughput"],
        ttft_ms=m["ttft_ms"]["median"],
        tpot_ms=m["tpot_ms"]["median"],
        e2e_ms=m["e2e_ms"]["median"],
    )


def read_aiperf(export: dict[str, Any]) -> Figures:
    """AIPerf's profile_export_aiperf.json: each metric a dict with its unit (ms, requests/sec,
    tokens/sec) and avg/p50/...; its inter_token_latency is a request's (E2E - TTFT) / (n - 1)."""
    return Figures(
        request_rate=export["request_throughput"]["avg"],
        output_tokens_per_s=export["output_token_throughput"]["avg"],
        ttft_ms=export["time_to_first_token"]["p50"],
        tpot_ms=export["inter_token_latency"]["p50"],
        e2e_ms=export["request_latency"]["p50"],
    )


def read_guidellm(report: dict[str, Any]) -> Figures:
    """guidellm's benchmarks.json, its one benchmark's successful requests. Its
    inter_token_latency_ms is (last token - first token) / (n - 1) a request; its
    time_per_output_token_ms is a different figure (latency / n, the first token included)."""
    metrics = report["benchmarks"][0]["metrics"]

    def successful(name: str) -> dict[str, Any]:
        return dict(metrics[name]["successful"])

    return Figures(
        request_rate=successful("requests_per_second")["mean"],
        output_tokens_per_s=successful("output_tokens_per_second")["mean"],
        ttft_ms=successful("time_to_first_token_ms")["median"],
        tpot_ms=successful("inter_token_latency_ms")["median"],
        e2e_ms=successful("request_latency")["median"] * 1000.0,
    )


def read_inference_perf(summary: dict[str, Any]) -> Figures:
    """inference-perf's summary_lifecycle_metrics.json: latencies in seconds; its
    time_per_output_token is (E2E - TTFT) / (n - 1) a request."""
    ok = summary["successes"]
    latency = ok["latency"]
    return Figures(
        request_rate=ok["throughput"]["requests_per_sec"],
        output_tokens_per_s=ok["throughput"]["output_tokens_per_sec"],
        ttft_ms=latency["time_to_first_token"]["median"] * 1000.0,
        tpot_ms=latency["time_per_output_token"]["median"] * 1000.0,
        e2e_ms=latency["request_latency"]["median"] * 1000.0,
    )


READERS = {"aiperf": read_aiperf, "guidellm": read_guidellm, "inference-perf": read_inference_perf}


# --- flowrate's trace under each peer's definitions ---------------------------------------------

# What differs between flowrate's definition of a figure and the peer's, named in the verdict.
DEFINITIONS: dict[str, dict[str, str]] = {
    "aiperf": {
        "request_rate": "AIPerf: completed / (its phase's start to the last response), the phase "
        "starting one gap (1/rate) before its first constant-rate send; flowrate: from the first "
        "scheduled send to the last stream's end",
        "output_tokens_per_s": "AIPerf: output tokens / (its phase's start, one gap before the "
        "first send, to the last response)",
        "ttft_ms": "AIPerf: the first response with non-empty content",
        "tpot_ms": "AIPerf's inter_token_latency: (request_latency - TTFT) / (n - 1), its "
        "request_latency to the last response (the usage chunk included)",
        "e2e_ms": "AIPerf: to the last response, the usage chunk after the text included",
    },
    "guidellm": {
        "request_rate": "guidellm: completed / its benchmark's duration (start to end)",
        "output_tokens_per_s": "guidellm: output tokens / its benchmark's duration",
        "ttft_ms": "guidellm: the first chunk with text",
        "tpot_ms": "guidellm's inter_token_latency: (last token - first token) / (n - 1)",
        "e2e_ms": "guidellm: request_latency, send to the response's end",
    },
    "inference-perf": {
        "request_rate": "inference-perf: completed / (first send to last end); its 'constant' load "
        "draws exponential gaps scaled to sum to the stage's length (a Poisson process given its "
        "count), not equal gaps, so its span is not flowrate's",
        "output_tokens_per_s": "inference-perf: output tokens / (first send to last end), its sends "
        "at Poisson gaps scaled to the stage's length",
        "ttft_ms": "inference-perf: the first chunk",
        "tpot_ms": "inference-perf's time_per_output_token: (E2E - TTFT) / (n - 1)",
        "e2e_ms": "inference-perf: to the stream's end",
    },
}

# The definition in flowrate.serving.metrics that reads a trace as each peer does.
TRACE_DEFINITION = {"aiperf": "genai_perf", "guidellm": "genai_perf", "inference-perf": "vllm"}


def traces_of(record: dict[str, Any]) -> list[RequestTrace]:
    return [RequestTrace.from_dict(t) for t in record["serving"]["traces"] if not t.get("warmup")]


def reread(record: dict[str, Any], peer: str) -> Figures:
    """flowrate's own traces, read under the peer's definitions (serving.metrics keeps vLLM's and
    genai-perf's; AIPerf's are genai-perf's, with its duration from its phase's start, one arrival
    gap before its first send at a constant rate): the figure a peer would have reported from the
    same requests."""
    traces = traces_of(record)
    definition = TRACE_DEFINITION[peer]
    summary = summarize(traces, definition)
    rows = per_request(traces, definition)
    tpots = [r.tpot_ms for r in rows if r.tpot_ms is not None]
    duration = summary["duration_s"]
    if peer == "aiperf":  # its constant-rate phase starts one gap before its first send
        duration += 1.0 / record["serving"]["rate"]
    return Figures(
        request_rate=summary["completed"] / duration,
        output_tokens_per_s=summary["output_tokens"] / duration,
        ttft_ms=summary["ttft_ms"]["median"],
        tpot_ms=statistics.median(tpots),
        e2e_ms=summary["e2e_ms"]["median"],
    )


# --- verdicts -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """One figure of one peer: the medians over rounds, their ratio, and where they are not within
    10%, the definition that differs and flowrate's trace re-read under it."""

    peer: str
    figure: str
    flowrate: float
    peer_value: float
    ratio: float
    within_10: bool
    rounds: tuple[tuple[float, float], ...] = ()  # (flowrate, peer) in each round: the noise
    definition: str | None = None
    reread: float | None = None
    reread_ratio: float | None = None
    within_3: bool | None = None

    @property
    def holds(self) -> bool:
        return self.within_10 or bool(self.within_3)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "holds": self.holds}


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


def verdicts(
    peer: str, flowrate: list[Figures], peer_rounds: list[Figures], rereads: list[Figures]
) -> list[Verdict]:
    """Per figure: flowrate's median over rounds ÷ the peer's, within 10%; where not, the peer's
    definition named and flowrate's traces re-read under it (median over rounds) ÷ the peer's,
    within 3%."""
    ours, theirs = median_of(flowrate), median_of(peer_rounds)
    again = median_of(rereads) if rereads else None
    out = []
    for name in FIGURES:
        ratio = _ratio(ours.get(name), theirs.get(name))
        rounds = tuple((a.get(name), b.get(name)) for a, b in zip(flowrate, peer_rounds, strict=True))
        if abs(ratio - 1) <= AGREE:
            out.append(Verdict(peer, name, ours.get(name), theirs.get(name), ratio, True, rounds))
            continue
        value = again.get(name) if again is not None else None
        second = _ratio(value, theirs.get(name)) if value is not None else None
        out.append(
            Verdict(
                peer,
                name,
                ours.get(name),
                theirs.get(name),
                ratio,
                False,
                rounds,
                DEFINITIONS[peer][name],
                value,
                second,
                second is not None and abs(second - 1) <= REREAD,
            )
        )
    return out


def table(rows: list[Verdict]) -> str:
    """The verdicts as printed: one line a figure."""
    lines = [f"{'peer':15} {'figure':20} {'flowrate':>10} {'peer':>10} {'ratio':>6}  within 10%"]
    for v in rows:
        line = (
            f"{v.peer:15} {v.figure:20} {v.flowrate:10.3f} {v.peer_value:10.3f} {v.ratio:6.3f}  "
            f"{'yes' if v.within_10 else 'no'}"
        )
        if v.rounds:
            each = ", ".join(f"{a:.4g}/{b:.4g}" for a, b in v.rounds)
            line += f"\n    rounds (flowrate/peer): {each}"
        if not v.within_10:
            reread = "-" if v.reread is None else f"{v.reread:.3f} (÷ peer {v.reread_ratio:.3f})"
            line += (
                f"\n    differs: {v.definition}\n    flowrate's trace under it: {reread}, "
                f"within 3%: {'yes' if v.within_3 else 'no'}"
            )
        lines.append(line)
    return "\n".join(lines)
