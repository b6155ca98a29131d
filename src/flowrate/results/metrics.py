"""The figures of a result that runs are listed, compared, plotted and ranked by: one table.

Each metric says how to read its run-level value from a Result, which way is better, and, where
every interval measures it, how to read it per interval (the raw samples a significance test
uses). The store's indexed columns, compare, pareto, the plots, the report and CSV export all
take their figures from here, so a figure means the same thing everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flowrate.errors import FlowrateError
from flowrate.results.schema import IntervalRecord, Result
from flowrate.results.sections import Generation, LatencyStats


@dataclass(frozen=True)
class Metric:
    name: str
    label: str  # for tables and axes
    unit: str
    higher_is_better: bool
    value: Callable[[Result], float | None]  # the run's figure; None where not recorded
    per_interval: Callable[[IntervalRecord], float | None] | None = None

    def interval_values(self, result: Result) -> list[float]:
        """This metric over the run's compute intervals (checkpoint intervals are not compute)."""
        if self.per_interval is None:
            return []
        read = self.per_interval
        return [v for i in result.intervals if i.kind == "compute" and (v := read(i)) is not None]


def peak_memory_bytes(result: Result) -> int | None:
    """The memory that limits a configuration: device peak reserved on an accelerator (what the
    process held, allocator cache included), else the process's peak resident set."""
    memory = result.memory
    device = memory.device_peak_reserved_bytes
    return device if device is not None else memory.process_peak_rss_bytes


def fidelity_loss(result: Result) -> float | None:
    """The loss a `flowrate check` reached (mean of its last window), None for plain runs."""
    return result.fidelity.final_loss if result.fidelity is not None else None


def _optional_float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


METRICS: dict[str, Metric] = {
    m.name: m
    for m in [
        Metric(
            "samples_per_sec",
            "samples/s",
            "samples/s",
            True,
            lambda r: r.summary.samples_per_sec,
            lambda i: i.samples_per_sec,
        ),
        Metric(
            "tokens_per_sec",
            "tokens/s",
            "tokens/s",
            True,
            lambda r: r.summary.tokens_per_sec,
        ),
        Metric(
            "model_flops_per_sec",
            "model FLOP/s",
            "FLOP/s",
            True,
            lambda r: r.summary.model_flops_per_sec,
            lambda i: i.model_flops_per_sec,
        ),
        Metric("mfu", "MFU", "", True, lambda r: _optional_float(r.flops.mfu), lambda i: i.mfu),
        Metric(
            "samples_per_joule",
            "samples/J",
            "samples/J",
            True,
            lambda r: _optional_float(r.energy.samples_per_joule),
        ),
        Metric(
            "average_watts",
            "power",
            "W",
            False,
            lambda r: _optional_float(r.energy.average_watts),
            lambda i: i.power_w,
        ),
        Metric(
            "peak_memory_bytes",
            "peak memory",
            "B",
            False,
            lambda r: _optional_float(peak_memory_bytes(r)),
        ),
        Metric("final_loss", "loss reached", "", False, lambda r: _optional_float(fidelity_loss(r))),
        Metric(
            "samples_per_dollar",
            "samples/$",
            "samples/$",
            True,
            lambda r: r.cost.samples_per_dollar if r.cost is not None else None,
        ),
        Metric(
            "dollars_per_million_tokens",
            "$/M tokens",
            "$/Mtok",
            False,
            lambda r: r.cost.dollars_per_million_tokens if r.cost is not None else None,
        ),
        Metric(
            "energy_cost",
            "energy cost",
            "$",
            False,
            lambda r: r.cost.energy_cost if r.cost is not None else None,
        ),
        Metric(
            "solution_seconds",
            "time to solution",
            "s",
            False,
            lambda r: r.solution.seconds if r.solution is not None else None,
        ),
        Metric(
            "solution_dollars",
            "cost to solution",
            "$",
            False,
            lambda r: r.solution.dollars if r.solution is not None else None,
        ),
    ]
}


def _serving_p99(latency: str) -> Callable[[Result], float | None]:
    """A serve-bench run's p99 of one latency under flowrate's definitions (serving/metrics.py)."""

    def read(result: Result) -> float | None:
        if result.serving is None:
            return None
        described = result.serving.figures().latency(latency)
        return _optional_float(described.p99 if described is not None else None)

    return read


# serve-bench latencies: compared only when both sides are serving runs (results/compare.py), kept
# out of METRICS so the store's columns and CSV export stay those of every run
SERVING_METRICS: dict[str, Metric] = {
    m.name: m
    for m in [
        Metric("ttft_p99_ms", "TTFT p99", "ms", False, _serving_p99("ttft_ms")),
        Metric("tpot_p99_ms", "TPOT p99", "ms", False, _serving_p99("tpot_ms")),
        Metric("e2e_p99_ms", "E2E p99", "ms", False, _serving_p99("e2e_ms")),
    ]
}


def _generation(
    figure: Callable[[Generation], object], scale: float = 1.0
) -> Callable[[Result], float | None]:
    """A `flowrate generate` run's ``figure`` of its generation section, times ``scale``."""

    def read(result: Result) -> float | None:
        if result.generation is None:
            return None
        number = _optional_float(figure(result.generation))
        return None if number is None else number * scale

    return read


def _median(stats: LatencyStats | None) -> float | None:
    return stats.median if stats is not None else None


# `flowrate generate` figures (harness/generate.py's section), for sweeps over generation: ranked,
# plotted and searched by name; kept out of METRICS for the same reason as the serving ones
GENERATION_METRICS: dict[str, Metric] = {
    m.name: m
    for m in [
        Metric(
            "decode_tokens_per_sec",
            "decode tokens/s",
            "tokens/s",
            True,
            _generation(lambda g: g.decode_tokens_per_sec),
        ),
        Metric(
            "prefill_tokens_per_sec",
            "prefill tokens/s",
            "tokens/s",
            True,
            _generation(lambda g: g.prefill_tokens_per_sec),
        ),
        Metric("ttft_ms", "TTFT median", "ms", False, _generation(lambda g: _median(g.ttft_s), scale=1e3)),
        Metric("tpot_ms", "TPOT median", "ms", False, _generation(lambda g: _median(g.tpot_s), scale=1e3)),
        Metric("prefill_mfu", "prefill MFU", "", True, _generation(lambda g: g.prefill_mfu)),
        Metric(
            "decode_bandwidth_utilization",
            "decode bandwidth used",
            "",
            True,
            _generation(lambda g: g.decode_bandwidth_utilization),
        ),
    ]
}
# every metric a command can be asked for by name
NAMED_METRICS: dict[str, Metric] = {**METRICS, **SERVING_METRICS, **GENERATION_METRICS}


def get_metric(name: str) -> Metric:
    """The metric called ``name`` (dashes or underscores), or an error listing the known ones."""
    key = name.strip().lower().replace("-", "_")
    if key not in NAMED_METRICS:
        raise FlowrateError(f"unknown metric {name!r}; known metrics: {', '.join(NAMED_METRICS)}")
    return NAMED_METRICS[key]
