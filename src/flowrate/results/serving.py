"""The serving section of a record (`flowrate serve-bench`): the load offered, every request's raw
trace, and the figures under each definition (flowrate.results.serving_metrics).

The section and its figures are open sections (flowrate.results.codec): the keys readers read
are named, any other key a record holds (an older or newer flowrate's) is kept in ``extra``, and
each is written again with the keys it was read with, in their order. A key a record lacks reads
as None. A request's trace is the one record type both the load generator (flowrate.serving)
fills in as the request runs and every reader of a stored run reads.

Times in a trace are seconds on one monotonic clock (time.perf_counter) measured from the run's
start, so every metric under every definition is computed later from these numbers alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flowrate.results.codec import decode, encode
from flowrate.results.serving_search import Bounded, RateSearch


@dataclass
class Chunk:
    """One SSE data event that carried ``choices``."""

    t_s: float  # arrival, since the run's start
    text: str  # the delta text ("" for a chunk carrying only a finish_reason)
    # the request's output tokens placed on this chunk (serving.tokens; they sum to the trace's
    # output_tokens); None until the trace is settled. Records made before output_tokens existed
    # hold the local tokenizer's count of the delta here, or None without one
    tokens: int | None


@dataclass
class RequestTrace:
    """One request: what was sent when, and every streamed chunk's arrival."""

    index: int
    scheduled_s: float  # when the load plan meant to send it
    sent_s: float = 0.0  # just before the request was written
    prompt_tokens: int | None = None  # by the local tokenizer (None without one)
    max_tokens: int = 0
    chunks: list[Chunk] = field(default_factory=list)
    end_s: float | None = None  # the stream's end ([DONE] or connection close)
    status: int | None = None  # HTTP status; None when no answer came
    error: str | None = None  # None: the request succeeded
    usage_prompt_tokens: int | None = None  # the server's `usage`, when it sent one
    usage_completion_tokens: int | None = None  # kept only when it agrees with the stream (usage.py)
    # what output_tokens counts: "usage", or the stream's own count, "tokenizer" (the whole text
    # tokenized once) or "chunks" (one a chunk with text); "stream" in records made before
    token_count_source: str | None = None
    usage_disagreement: str | None = None  # why the server's completion count was not used
    input_len: int | None = None  # the prompt length asked for (None: a dataset's prompt)
    output_tokens: int | None = None  # the one output count (usage.settle) every definition reads
    # a --warmup request: sent before the load, kept out of every figure; its times are on the
    # load's clock, so they are negative
    warmup: bool = False
    prefix_group: int | None = None  # the --shared-prefix-len prefix its prompt starts with
    # --turns: the conversation it belongs to and its turn in it (0 first), None for single turns
    conversation: int | None = None
    turn: int | None = None
    extra: dict[str, object] = field(default_factory=dict)  # keys a stored trace holds beyond these
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.error is None and self.end_s is not None

    @property
    def lateness_s(self) -> float:
        return self.sent_s - self.scheduled_s

    @property
    def text(self) -> str:
        return "".join(c.text for c in self.chunks)

    def shift(self, by_s: float) -> None:
        """Move every time by ``by_s`` seconds (onto another origin of the same clock)."""
        self.scheduled_s += by_s
        self.sent_s += by_s
        self.end_s = None if self.end_s is None else self.end_s + by_s
        for chunk in self.chunks:
            chunk.t_s += by_s

    def to_dict(self) -> dict[str, Any]:
        return encode(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RequestTrace:
        return decode(cls, data)


def measured(traces: list[RequestTrace]) -> list[RequestTrace]:
    """The requests the figures count: all but --warmup's."""
    return [t for t in traces if not t.warmup]


@dataclass(frozen=True)
class Described:
    """A sample's description (flowrate.serving.stats.describe): its size, mean, median, p90 and
    p99, each with its 95% interval (``<name>_ci``, None where the sample is too small)."""

    n: int | None = None
    mean: float | None = None
    mean_ci: list[float] | None = None
    median: float | None = None
    median_ci: list[float] | None = None
    p90: float | None = None
    p90_ci: list[float] | None = None
    p99: float | None = None
    p99_ci: list[float] | None = None
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class DefinitionFigures:
    """One definition's figures over the measured requests (latencies in ms, rates per second);
    goodput and slo_attainment only under an SLO."""

    duration_s: float | None = None
    completed: int | None = None
    ttft_ms: Described | None = None
    tpot_ms: Described | None = None
    e2e_ms: Described | None = None
    itl_ms: Described | None = None
    request_throughput: float | None = None
    output_token_throughput: float | None = None
    total_token_throughput: float | None = None
    output_tokens: int | None = None
    input_tokens: int | None = None
    error_rate: float | None = None
    goodput: float | None = None
    slo_attainment: float | None = None
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)

    def latency(self, name: str) -> Described | None:
        """ttft_ms, tpot_ms, e2e_ms or itl_ms by name."""
        found: Described | None = getattr(self, name) if name in _LATENCY_NAMES else None
        return found


_LATENCY_NAMES = frozenset({"ttft_ms", "tpot_ms", "e2e_ms", "itl_ms"})


@dataclass(frozen=True)
class TurnFigures:
    """--turns: one turn number's requests, how many completed, and the medians of their TTFT (ms,
    flowrate's definition) and of the prompt tokens the server counted (the context the
    conversation had grown to)."""

    turn: int | None = None  # 0 for the first
    requests: int | None = None
    completed: int | None = None
    ttft_ms_median: float | None = None
    prompt_tokens_median: float | None = None
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class SweepPlace:
    """A sweep of loads (--rate or --concurrency lists): the sweep a run is one point of, its
    place in it, every load the sweep meant to send, why the sweep stopped, whether this point was
    cut, and its --slo verdict with the figures the verdict read."""

    id: str | None = None
    point: int | None = None  # 0 for the first load
    loads: list[str] | None = None
    stopped: str | None = None
    cut: str | None = None  # why this point was cut (then partial); None: measured whole
    verdict: str | None = None  # pass, fail or undecided; None without --slo or for a cut point
    slo_latency_ms: dict[str, Bounded] | None = None  # by SLO key, as a rate search's point
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class MetricFamily:
    """One family of the server's /metrics over the load: a gauge's value before and after it, a
    histogram's or summary's count, sum and mean of what the load added, a counter's increase."""

    type: str | None = None  # gauge, counter, histogram, summary
    before: float | None = None
    after: float | None = None
    count: float | None = None
    sum: float | None = None
    mean: float | None = None
    increase: float | None = None
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ServerMetrics:
    """--server-metrics: the server's own figures (flowrate.serving.server_metrics), each family
    scraped before and after the load by its name, or why there are none."""

    available: bool | None = None
    reason: str | None = None  # why not available
    families: dict[str, MetricFamily] | None = None
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class PromptCalibration:
    """How synthetic prompts were sized by the server's own token counts (flowrate.serving.prompts'
    WordCosts: the tokens each word costs first and after), or why they were not."""

    calibrated: bool | None = None
    reason: str | None = None  # why not calibrated: a word was taken as a token
    first: dict[str, int] | None = None
    after: dict[str, int] | None = None
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Serving:
    """`flowrate serve-bench`: the target and the load (the settings), what happened to the
    requests, the figures under each definition, and every request's trace (warm-up ones marked);
    ``search`` holds --find-max-rate's points, ``sweep`` a sweep point's place."""

    # the target
    url: str | None = None
    model: str | None = None
    endpoint: str | None = None
    server_device: str | None = None  # what the server runs on, as --server-device said
    # the load
    scenario: str | None = None
    rate: float | str | None = None  # requests/s offered; "inf": all at once; None: concurrency
    burstiness: float | None = None
    arrivals: str | None = None  # constant, poisson or gamma; None: recorded before --arrivals
    ramp_up_s: float | None = None
    concurrency: int | None = None
    replay: str | None = None
    dataset: str | None = None
    # the lengths asked for, as their spec (flowrate.serving.lengths) in one spelling (length_spec;
    # a record made before may hold another, which the load's identity reads as this one)
    input_len: int | str | None = None
    output_len: int | str | None = None
    shared_prefix_len: int | None = None
    prefix_groups: int | None = None
    # --turns: the spec of each conversation's turns, the conversations sent (None: single turns)
    # and the seconds between an answer and the next turn
    turns: int | str | None = None
    conversations: int | None = None
    think_time_s: float | None = None
    tokenizer: str | None = None
    token_counts: str | None = None  # how a request's output tokens are counted
    slo: dict[str, float] | None = None  # the SLO's limits in ms, by latency
    seed: int | None = None
    warmup: int | None = None  # requests sent first and kept out of every figure
    server_metrics: ServerMetrics | None = None  # --server-metrics: the server's own figures
    prompt_calibration: PromptCalibration | None = None
    # what happened
    partial: bool | None = None  # interrupted (Ctrl-C): the figures cover the requests measured
    requests: int | None = None
    errors: dict[str, int] | None = None  # failed requests by the error's kind
    usage_disagreements: int | None = None
    token_count_sources: dict[str, int] | None = None
    prompt_tokens: Described | None = None  # the prompts' lengths as measured
    prompts_off_length: int | None = None
    send_lateness_ms: Described | None = None
    metrics: dict[str, DefinitionFigures] = field(default_factory=dict)  # by definition
    per_turn: list[TurnFigures] | None = None  # --turns: the figures of each turn number
    traces: list[RequestTrace] = field(default_factory=list)
    search: RateSearch | None = None  # --find-max-rate: every point and the rate found
    sweep: SweepPlace | None = None  # a sweep of loads: this run's place in it
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)

    def figures(self, definition: str = "flowrate") -> DefinitionFigures:
        """One definition's figures (every field None where the record has none)."""
        found = self.metrics.get(definition)
        return found if isinstance(found, DefinitionFigures) else DefinitionFigures()

    @property
    def mistyped(self) -> list[str]:
        """The named keys whose stored value is not what the section holds there (kept in
        ``extra``, read as None): a hand-edited record's."""
        return [key for key in self.extra if key in _SERVING_FIELDS]

    @property
    def measured_traces(self) -> list[RequestTrace]:
        """The traces the figures count: all but --warmup's."""
        return measured(self.traces)


_SERVING_FIELDS = frozenset(Serving.__dataclass_fields__) - {"extra", "written"}


def length_spec(spec: int | str | None) -> int | str | None:
    """One spelling for each length distribution (flowrate.serving.lengths' specs), as the serving
    section records it and the load's identity compares it: ``N`` for a fixed length, ``LOW:HIGH``
    for a uniform range (``uniform:LOW,HIGH`` and ``N:N`` say the same), ``normal:MEAN,STD`` and
    ``lognormal:MEDIAN,SIGMA`` with their numbers written shortest; a file's spec, and anything
    that is not a spec, as given."""
    if not isinstance(spec, str):
        return spec
    kind, sep, rest = spec.strip().partition(":")
    kind = kind.strip()
    try:
        if not sep:
            return str(int(kind))
        if kind.isdigit():
            return _range(int(kind), int(rest))
        parts = [p.strip() for p in rest.split(",")]
        if kind == "uniform" and len(parts) == 2:
            return _range(int(parts[0]), int(parts[1]))
        if kind in ("normal", "lognormal") and len(parts) == 2:
            return f"{kind}:{_number(float(parts[0]))},{_number(float(parts[1]))}"
    except ValueError:
        pass
    return spec


def _range(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}:{high}"


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def serving_from(data: Mapping[str, Any]) -> Serving:
    """The section from its plain values (flowrate.serving.result's, a record's)."""
    return decode(Serving, data)
