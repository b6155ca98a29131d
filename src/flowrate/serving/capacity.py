"""--find-max-rate against a server: its plan and estimate, each point as one bench run, and the
search as the serving section stores it (every point with its traces; serving.search decides)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from flowrate.config.serve import ServeConfig
from flowrate.errors import ConfigError
from flowrate.results.serving import RequestTrace
from flowrate.results.serving_metrics import per_request
from flowrate.results.serving_search import RateSearch, search_from
from flowrate.serving import bench, load
from flowrate.serving.metrics import summarize
from flowrate.serving.prompts import LocalTokenizer, Prompt
from flowrate.serving.search import (
    BUDGET,
    INTERRUPTED,
    Measured,
    Search,
    SearchSettings,
    find_max_rate,
)
from flowrate.units import duration

DEFAULT_BUDGET_S = 600.0
FINISH_S = 3.0  # of the budget, kept for building and writing the record after the last point
OWN = ("budget", "slo_percentile", "confidence", "resolution")  # flags only a search takes
RULE = "the percentile's distribution-free upper bound within every SLO limit (serving.search)"


def settings_from(
    config: ServeConfig, rate: float | None, slo: dict[str, float] | None, sweep: bool = False
) -> SearchSettings | None:
    """The search's settings from serve-bench's config (None without --find-max-rate, whose own
    flags are then refused, but for those a ``sweep`` of loads takes too: --budget, and with --slo
    --slo-percentile and --confidence); a budget the first point cannot fit is refused before
    anything is sent."""
    given = [name for name in OWN if getattr(config, name) is not None]
    if not config.find_max_rate:
        shared = ("budget", "slo_percentile", "confidence") if sweep and slo else ("budget",) if sweep else ()
        given = [name for name in given if name not in shared]
        if given:
            raise ConfigError("--" + given[0].replace("_", "-"), "only with --find-max-rate")
        return None
    if rate is None or not slo:
        raise ConfigError("--find-max-rate", "needs --slo and a starting --rate")
    if not math.isfinite(rate):
        raise ConfigError("--rate", "--find-max-rate starts from a finite rate (requests/s), not inf")
    settings = SearchSettings(
        start_rate=rate,
        slo=slo,
        percentile=(config.slo_percentile or 99.0) / 100,
        confidence=config.confidence or 0.95,
        resolution=config.resolution or 0.05,
        budget_s=config.budget or DEFAULT_BUDGET_S,
    )
    first = settings.point_s(rate, settings.first_drain_s())
    if first > settings.budget_s - FINISH_S:
        raise ConfigError(
            "--budget",
            f"{duration(settings.budget_s)} cannot fit the first point: {settings.requests} requests at "
            f"{rate:g} req/s take about {duration(first)}; raise --budget, start at a higher --rate, "
            "or lower --slo-percentile or --confidence",
        )
    return settings


def plan_lines(settings: SearchSettings) -> list[str]:
    """What the search will do and about how long it takes, said before anything is sent."""
    q, c, n = settings.percentile, settings.confidence, settings.requests
    limits = ", ".join(f"{key} <= {limit:g}" for key, limit in settings.slo.items())
    first = settings.point_s(settings.start_rate, settings.first_drain_s())
    return [
        f"  the highest rate whose p{q * 100:g} meets {limits} (ms), with {c:.0%} confidence",
        f"  {n} requests a point: the fewest whose p{q * 100:g} has a distribution-free {c:.0%} upper "
        f"bound, n = ceil(ln(1 - {c:g}) / ln({q:g}))",
        f"  from {settings.start_rate:g} req/s: doubling while points pass, halving while none has, "
        f"then bisecting to {settings.resolution:.0%} (about {settings.bisections()} points once bracketed)",
        f"  a point at R req/s takes about {n}/R s and its drain: the first about {duration(first)}; "
        f"budget {duration(settings.budget_s)}, no point is started that would not fit",
    ]


def _samples(traces: list[RequestTrace], keys: list[str]) -> dict[str, list[float]]:
    """Each SLO'd latency of each request (ms): a failed request's is infinite."""
    rows = per_request(traces, "flowrate")
    failed = sum(not t.ok for t in traces)
    return {
        key: [value for r in rows if (value := r.latency(key)) is not None] + [math.inf] * failed
        for key in keys
    }


def _record(traces: list[RequestTrace]) -> dict[str, Any]:
    ours = summarize(traces, "flowrate")
    return {
        "requests": len(traces),
        "completed": ours["completed"],
        "errors": sum(not t.ok for t in traces),
        "duration_s": ours["duration_s"],
        "request_throughput": ours["request_throughput"],  # achieved requests/s
        "output_token_throughput": ours["output_token_throughput"],
        "traces": [t.to_dict() for t in traces],
    }


class Runner:
    """Sends points (the rate search's, a sweep's), each ``requests`` long from the prompts cycled;
    keeps each one's outcome so the search's best or each sweep point can be recorded whole."""

    def __init__(
        self,
        target: bench.Target,
        prompts: list[Prompt],
        load_settings: dict[str, Any],
        requests: int,
        keys: list[str],
        deadline_s: float,
        tokenizer: LocalTokenizer | None,
        conversations: bench.Conversations | None = None,
    ) -> None:
        self.target, self.keys, self.deadline_s, self.tokenizer = target, keys, deadline_s, tokenizer
        self.load, self.conversations = load_settings, conversations
        self.sent = [prompts[i % len(prompts)] for i in range(requests)]
        self.outcomes: list[bench.Outcome] = []

    def measure(self, rate: float, left_s: float) -> Measured:
        """One point at ``rate`` requests/s (the rate search's measure)."""
        return self.measure_at(rate, None, left_s)

    def measure_at(self, rate: float | None, concurrency: int | None, left_s: float) -> Measured:
        """One point, open loop at ``rate`` or closed loop at ``concurrency``, cut at the budget's
        end (or --deadline); Ctrl-C anywhere in it cuts it."""
        outcome = bench.Outcome(partial=True)
        self.outcomes.append(outcome)
        starts = len(self.sent) if self.conversations is None else len(self.conversations.turns)
        times = (
            None
            if rate is None
            else load.arrival_times(
                starts,
                rate,
                self.load["burstiness"],
                0.0,
                self.load["seed"],
                self.load["arrivals"] == "constant",
            )
        )
        stop_s = min(self.deadline_s, left_s)
        try:
            outcome = bench.run(
                self.target,
                self.sent,
                times=times,
                concurrency=concurrency or 1,
                deadline_s=stop_s,
                tokenizer=self.tokenizer,
                conversations=self.conversations,
            )
            self.outcomes[-1] = outcome
            unfinished = any(t.error == bench.UNFINISHED for t in outcome.traces)
            cut = INTERRUPTED if outcome.partial else BUDGET if unfinished else None
            rows = per_request(outcome.traces, "flowrate")
            slowest = max((r.e2e_ms for r in rows if r.e2e_ms is not None), default=0.0) / 1000
            return Measured(_samples(outcome.traces, self.keys), slowest, cut, _record(outcome.traces))
        except KeyboardInterrupt:  # outside the load itself (the probe's connect, the summary)
            return Measured({}, 0.0, INTERRUPTED, _record(outcome.traces))


def run_search(
    runner: Runner, settings: SearchSettings, say: Callable[[str], None], started: float
) -> tuple[bench.Outcome, float | None, RateSearch]:
    """The search within what is left of the budget since ``started`` (time.monotonic()): the
    outcome to headline (the best rate's point, else the last one measured whole, else the cut
    one), its rate, and the section's ``search``. One Ctrl-C stops it all."""
    settings_left = SearchSettings(
        **{**settings.__dict__, "budget_s": settings.budget_s - (time.monotonic() - started) - FINISH_S}
    )
    search = Search()
    try:
        find_max_rate(runner.measure, settings_left, time.monotonic, say, search)
    except KeyboardInterrupt:  # between points
        search.stopped = INTERRUPTED
    search.spent_s = time.monotonic() - started
    whole = [i for i, p in enumerate(search.points) if not p["partial"]]
    best = [i for i in whole if search.points[i]["rate"] == search.max_rate]
    chosen = best[0] if best else whole[-1] if whole else len(search.points) - 1
    headline = runner.outcomes[chosen] if chosen >= 0 else bench.Outcome(partial=True)
    section = {
        "max_rate": search.max_rate,
        "percentile": settings.percentile * 100,
        "confidence": settings.confidence,
        "requests_per_point": settings.requests,
        "resolution": settings.resolution,
        "budget_s": settings.budget_s,
        "spent_s": search.spent_s,
        "stopped": search.stopped,
        "rule": RULE,
        "headline_point": chosen if chosen >= 0 else None,
        "points": search.points,
    }
    rate = search.points[chosen]["rate"] if chosen >= 0 else settings.start_rate
    return headline, rate, search_from(section)
