"""One value per process: what a comparison, the noise model and a history count as a run.

Intervals of one process share its offset (flowrate.results.verdict says why), so a run is one
value per metric, and a --repeat result — one record for N fresh processes
(flowrate.campaigns.repeat) — is N values.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from flowrate.results.metrics import Metric
from flowrate.results.schema import Result

# figures proportional to samples/s at a fixed configuration: a repeat's value is its samples/s
# times the run's figure per sample
_PER_SAMPLE = frozenset({"tokens_per_sec", "model_flops_per_sec"})
# a --repeat result's per-process entries (campaigns/repeat.py) by metric
_REPEAT_KEYS = {"samples_per_sec": "median_samples_per_sec", "mfu": "mfu", "final_loss": "final_loss"}


def process_values(metric: Metric, result: Result) -> list[float]:
    """One value of ``metric`` per process a result stands for: the run's median interval value
    (its figure where intervals do not measure it), or, for a --repeat result, each repeat's own
    (samples/s: each process's median; tokens/s and model FLOP/s: that scaled by the run's
    figure per sample)."""
    per_process = _repeat_values(metric, result)
    if per_process:
        return per_process
    intervals = metric.interval_values(result)
    if intervals:
        return [statistics.median(intervals)]
    value = metric.value(result)
    return [] if value is None else [value]


def _repeat_values(metric: Metric, result: Result) -> list[float]:
    entries = result.repeat.runs if result.repeat is not None else []
    if metric.name in _REPEAT_KEYS:
        key = _REPEAT_KEYS[metric.name]
        return [float(v) for e in entries if isinstance(v := getattr(e, key), int | float)]
    value, rate = metric.value(result), result.summary.samples_per_sec
    if metric.name in _PER_SAMPLE and value is not None and rate > 0:
        medians = [e.median_samples_per_sec for e in entries]
        return [float(m) * value / rate for m in medians if isinstance(m, int | float)]
    return []


def side_values(metric: Metric, runs: Sequence[Result]) -> list[float]:
    """A side's values of a metric, one per process (a --repeat result gives several)."""
    return [v for run in runs for v in process_values(metric, run)]
