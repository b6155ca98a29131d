"""A serve-bench run as a Result: requests are the samples, so the store, `runs` and `compare`
read requests/s (samples_per_sec) and output tokens/s (tokens_per_sec); the serving section holds
the load, the raw traces and every metric under each definition."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from flowrate._version import __version__
from flowrate.measure.stats import summarize as summarize_rates
from flowrate.results.configs import ServeRecordConfig
from flowrate.results.environment import Environment
from flowrate.results.schema import IntervalRecord, Result, RunSummary
from flowrate.results.sections import Kind, ProblemInfo
from flowrate.results.serving import PromptCalibration, RequestTrace, Serving, measured, serving_from
from flowrate.results.serving_metrics import per_request
from flowrate.serving.metrics import Slo, all_definitions
from flowrate.serving.stats import describe

WINDOWS = 20  # intervals: completions counted in equal windows of the run


def serving_section(
    traces: list[RequestTrace], slo: Slo | None, settings: dict[str, Any], partial: bool
) -> Serving:
    """The section: every figure from the measured requests (--warmup's are kept out of all of
    them), and every trace, warm-up ones included and marked."""
    everything, traces = traces, measured(traces)
    errors: dict[str, int] = {}
    for trace in traces:
        if not trace.ok:
            key = (trace.error or "unfinished").split(":")[0]
            errors[key] = errors.get(key, 0) + 1
    return serving_from(
        {
            **settings,
            "partial": partial,
            "requests": len(traces),
            "errors": errors,
            "usage_disagreements": sum(t.usage_disagreement is not None for t in traces),
            "token_count_sources": _sources(traces),
            # the prompts' lengths as measured: the tokenizer's count, else the server's
            "prompt_tokens": describe([m for t in traces if (m := measured_prompt(t)) is not None]),
            "prompts_off_length": len(off_length(traces)),
            "send_lateness_ms": describe([t.lateness_s * 1000 for t in traces]),
            "metrics": all_definitions(traces, slo),
            "per_turn": per_turn(traces),
            "traces": [t.to_dict() for t in everything],
        }
    )


def per_turn(traces: list[RequestTrace]) -> list[dict[str, Any]] | None:
    """--turns: for each turn number, its requests, how many completed, and the medians of their
    TTFT (ms, flowrate's definition) and of the prompt tokens the server counted (the context
    the conversation had grown to); None for single-turn requests."""
    turns = sorted({t.turn for t in traces if t.turn is not None})
    if not turns:
        return None
    out = []
    for turn in turns:
        these = [t for t in traces if t.turn == turn]
        ttft = describe([r.ttft_ms for r in per_request(these, "flowrate") if r.ttft_ms is not None])
        context = describe([t.usage_prompt_tokens for t in these if isinstance(t.usage_prompt_tokens, int)])
        out.append(
            {
                "turn": turn,
                "requests": len(these),
                "completed": sum(t.ok for t in these),
                "ttft_ms_median": None if ttft is None else ttft["median"],
                "prompt_tokens_median": None if context is None else context["median"],
            }
        )
    return out


PROMPT_TOLERANCE = 0.05  # a prompt further than this share from its asked length is warned of


def measured_prompt(trace: RequestTrace) -> int | None:
    """A prompt's length: the local tokenizer's count when there is one, else the server's."""
    return trace.prompt_tokens if trace.prompt_tokens is not None else trace.usage_prompt_tokens


def off_length(traces: list[RequestTrace]) -> list[RequestTrace]:
    """Requests whose measured prompt is more than PROMPT_TOLERANCE from the length asked (a
    conversation's first turn only: the server counts a later one's history too)."""
    return [
        t
        for t in traces
        if t.input_len is not None
        and not t.turn
        and (m := measured_prompt(t)) is not None
        and abs(m - t.input_len) > PROMPT_TOLERANCE * t.input_len
    ]


def _sources(traces: list[RequestTrace]) -> dict[str, int]:
    """How many completed requests' output counts came from each source (usage.settle)."""
    out: dict[str, int] = {}
    for trace in traces:
        if trace.ok and trace.token_count_source is not None:
            out[trace.token_count_source] = out.get(trace.token_count_source, 0) + 1
    return out


def _intervals(traces: list[RequestTrace], duration: float) -> list[IntervalRecord]:
    ends = sorted(t.end_s or 0.0 for t in traces if t.ok)
    count = max(1, min(WINDOWS, len(ends)))
    width = duration / count
    counts = [0] * count
    for end in ends:
        counts[min(count - 1, int(end / width))] += 1
    out = []
    for index, done in enumerate(counts):
        rate = done / width
        out.append(
            IntervalRecord(index, "compute", index, 1, done, width, rate, rate, rate, (index + 1) * width)
        )
    return out


def build_result(
    traces: list[RequestTrace],
    section: Serving,
    environment: Environment,
) -> Result:
    traces = measured(traces)
    ours = section.figures()
    duration = max(ours.duration_s or 0.0, 1e-9)
    intervals = _intervals(traces, duration)
    completed = ours.completed or 0
    stats = summarize_rates([i.samples_per_sec for i in intervals])  # no completion: cv None
    summary = RunSummary(
        samples_per_sec=ours.request_throughput or 0.0,
        rate_samples_per_sec=intervals[-1].samples_per_sec,
        steps_per_sec=ours.request_throughput or 0.0,
        tokens_per_sec=ours.output_token_throughput,
        model_flops_per_sec=0.0,
        **stats.rate_fields(),
        timed_steps=completed,
        timed_samples=completed,
        timed_duration_s=duration,
        intervals=len(intervals),
        sample_every_steps=1,
        preheat_steps=0,
        preheat_s=0.0,
        final_loss=None,
    )
    return Result(
        config=ServeRecordConfig(),
        problem=ProblemInfo(name=f"serve:{section.model}"),
        batch_size=1,
        environment=environment,
        intervals=intervals,
        losses=[],
        summary=summary,
        warnings=run_warnings(traces, section),
        serving=section,
        kind=Kind.SERVE,
        run_id=uuid.uuid4().hex[:12],
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        flowrate_version=__version__,
    )


def run_warnings(traces: list[RequestTrace], section: Serving) -> list[str]:
    """One line for an interrupted run, one for requests whose usage disagreed with the stream,
    one for prompts off their asked length, one for prompt lengths left uncalibrated."""
    out = []
    if section.partial:
        out.append("interrupted (Ctrl-C): the figures cover the requests measured so far")
    disagreed = [t for t in traces if t.usage_disagreement is not None]
    if disagreed:
        out.append(
            f"{len(disagreed)} of {len(traces)} requests' usage disagreed with their stream "
            f"(request {disagreed[0].index}: {disagreed[0].usage_disagreement}); those count "
            "the stream's tokens (token_count_source in their traces)"
        )
    off = off_length(traces)
    if off:
        first = off[0]
        counter = "the tokenizer" if first.prompt_tokens is not None else "the server"
        out.append(
            f"{len(off)} of {len(traces)} prompts are more than {PROMPT_TOLERANCE:.0%} from the length "
            f"asked (request {first.index}: asked {first.input_len}, {counter} counted "
            f"{measured_prompt(first)}); each trace holds its prompt's counts "
            "(prompt_tokens, usage_prompt_tokens)"
        )
    scraped = section.server_metrics
    if scraped is not None and scraped.available is False:
        out.append(f"--server-metrics: {scraped.reason}; the server's own figures are not recorded")
    calibration = section.prompt_calibration or PromptCalibration()
    if calibration.calibrated is False:
        out.append(
            f"prompt lengths were not calibrated ({calibration.reason}): a word was taken as a "
            "token; give --tokenizer for exact lengths"
        )
    return out
