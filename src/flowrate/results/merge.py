"""One Result from the ranks of a data-parallel run: throughput is the sum over ranks.

MEASUREMENT.md: data-parallel throughput is the sum over ranks of each rank's samples per second
of its own wall time — not the mean over ranks, and not all samples over one rank's time. Every
rank times its own intervals; sample points fall at the same steps on every rank (the loop's
Consensus), so interval k means the same steps everywhere and its figures combine:

- rates (local, Rate, GlobalRate, model FLOP/s, bytes/s) and samples are sums over ranks;
  ``seconds`` is samples / summed rate (the time the interval's samples took at that rate: the
  harmonic mean of the ranks' interval times when their batches are equal); ``elapsed_s`` is
  the slowest rank's;
- ratios (MFU, HFU, input-bound share) are means over ranks: MFU is then the system's model FLOP/s
  over the sum of its devices' peaks;
- the loss of a step is the mean of the ranks' losses — the loss over the global batch when
  per-rank batches are equal, as in single-process training on the concatenated batch;
- energy is summed over distinct meters: ranks sharing a host's RAPL counters count them once;
- memory is the largest rank's (what must fit on one device).

``batch_size`` becomes the global batch (samples per step over all ranks), so that samples/s over
it is steps/s; the ``distributed`` section keeps the per-rank batch and every rank's figures.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from flowrate.choices import Execution, Mode
from flowrate.errors import FlowrateError
from flowrate.measure.stats import MIN_INTERVALS, summarize
from flowrate.results.configs import SharedConfig
from flowrate.results.schema import IntervalRecord, Result, RunSummary
from flowrate.results.sections import Distributed, Energy, Flops, Input, Memory, RankFigures

# Ranks whose throughput differs by this share of the median get a straggler warning (from
# MIN_INTERVALS intervals on: a few milliseconds of start-up skew dominate shorter runs).
STRAGGLER_SPREAD = 0.10


@dataclass(frozen=True)
class RankRun:
    """What one rank sends to rank 0: where it ran, and its own result (as a dict: picklable)."""

    rank: int
    local_rank: int
    hostname: str
    device: str
    result: dict[str, Any]


def merge_ranks(runs: Sequence[RankRun], backend: str, timeout_s: float | None = None) -> Result:
    """The run as one Result: rank 0's record with summed figures and a ``distributed`` section."""
    runs = sorted(runs, key=lambda r: r.rank)
    results = [Result.from_dict(r.result) for r in runs]
    first = results[0]
    metered = _distinct_meters(runs, results)
    intervals = [_merge_interval(list(group), metered) for group in _aligned(results)]
    losses = [statistics.fmean(step) for step in zip(*(r.losses for r in results), strict=True)]
    global_batch = sum(r.batch_size for r in results)
    summary = _summary(results, intervals, global_batch)
    samples = summary.timed_samples
    model_flops = samples * (first.problem.model_flops_per_sample or 0)
    rates = [r.summary.samples_per_sec for r in results]
    section = Distributed(
        world_size=len(runs),
        backend=backend,
        hosts=len({r.hostname for r in runs}),
        timeout_s=timeout_s,
        batch_size_per_rank=first.batch_size,
        global_batch_size=global_batch,
        samples_per_sec=summary.samples_per_sec,
        median_rank_samples_per_sec=statistics.median(rates),
        slowest_rank=min(range(len(rates)), key=rates.__getitem__),
        rank_spread=(max(rates) - min(rates)) / statistics.median(rates) if max(rates) > 0 else 0.0,
        gradient_reduction=_reduction(first.config, backend),
        ranks=[_rank_entry(run, result) for run, result in zip(runs, results, strict=True)],
    )
    return dataclasses.replace(
        first,
        batch_size=global_batch,
        intervals=intervals,
        losses=losses,
        summary=summary,
        warnings=_warnings(results, section),
        flops=_merge_flops(results),
        energy=_merge_energy(runs, results, metered, samples, model_flops),
        memory=_merge_memory(results),
        input=_merge_input(results),
        distributed=section,
    )


def _aligned(results: Sequence[Result]) -> Iterable[tuple[IntervalRecord, ...]]:
    """Interval k of every rank, after checking that they cover the same steps."""
    counts = {len(r.intervals) for r in results}
    if len(counts) != 1 or len({len(r.losses) for r in results}) != 1:
        raise FlowrateError(
            "the ranks measured different numbers of intervals or steps; their sample points did not "
            "agree, so their throughput cannot be summed"
        )
    for group in zip(*(r.intervals for r in results), strict=True):
        if len({(i.kind, i.first_step, i.steps) for i in group}) != 1:
            raise FlowrateError(f"interval {group[0].index} covers different steps on different ranks")
        yield group


def _distinct_meters(runs: Sequence[RankRun], results: Sequence[Result]) -> list[int]:
    """Indexes of the ranks whose energy meters are distinct (a host's RAPL counters count once)."""
    seen: set[tuple[Any, ...]] = set()
    keep = []
    for index, (run, result) in enumerate(zip(runs, results, strict=True)):
        energy = result.energy
        key = (run.hostname, energy.method, tuple(energy.domains))
        if key not in seen:
            seen.add(key)
            keep.append(index)
    return keep


def _merge_interval(group: list[IntervalRecord], metered: Sequence[int]) -> IntervalRecord:
    first = group[0]
    samples = sum(i.samples for i in group)
    rate = sum(i.samples_per_sec for i in group)
    seconds = samples / rate if samples and rate > 0 else max(i.seconds for i in group)
    return dataclasses.replace(
        first,
        samples=samples,
        seconds=seconds,
        samples_per_sec=rate,
        rate_samples_per_sec=sum(i.rate_samples_per_sec for i in group),
        global_samples_per_sec=sum(i.global_samples_per_sec for i in group),
        elapsed_s=max(i.elapsed_s for i in group),
        loss=_mean(i.loss for i in group),
        model_flops_per_sec=_sum(i.model_flops_per_sec for i in group),
        mfu=_mean(i.mfu for i in group),
        power_w=_sum(group[k].power_w for k in metered),
        device_memory_allocated_bytes=_max(i.device_memory_allocated_bytes for i in group),
        process_rss_bytes=_max(i.process_rss_bytes for i in group),
        input_wait_s=_mean(i.input_wait_s for i in group),
        input_bound_share=_mean(i.input_bound_share for i in group),
    )


def _summary(results: Sequence[Result], intervals: Sequence[IntervalRecord], global_batch: int) -> RunSummary:
    first = results[0]
    compute = [i for i in intervals if i.kind == "compute"]
    stats = summarize([i.samples_per_sec for i in compute])
    total = sum(r.summary.samples_per_sec for r in results)
    tokens = first.problem.tokens_per_sample
    duration = max(r.summary.timed_duration_s for r in results)
    checkpoint_s = max(r.summary.checkpoint_s for r in results)
    return dataclasses.replace(
        first.summary,
        samples_per_sec=total,
        rate_samples_per_sec=sum(r.summary.rate_samples_per_sec for r in results),
        steps_per_sec=total / global_batch,
        tokens_per_sec=total * tokens if tokens else None,
        model_flops_per_sec=total * (first.problem.model_flops_per_sample or 0),
        **stats.rate_fields(),
        timed_samples=sum(r.summary.timed_samples for r in results),
        timed_duration_s=duration,
        preheat_s=max(r.summary.preheat_s for r in results),
        final_loss=_mean(r.summary.final_loss for r in results),
        compute_samples_per_sec=_sum(r.summary.compute_samples_per_sec for r in results),
        checkpoint_s=checkpoint_s,
        checkpoint_overhead=checkpoint_s / duration if duration > 0 else 0.0,
    )


def _merge_flops(results: Sequence[Result]) -> Flops:
    """Rates summed over the ranks, utilizations averaged; the rest is rank 0's."""
    flops = [r.flops for r in results]
    return dataclasses.replace(
        flops[0],
        model_flops_per_sec=_sum(f.model_flops_per_sec for f in flops),
        hardware_flops_per_sec=_sum(f.hardware_flops_per_sec for f in flops),
        bytes_per_sec=_sum(f.bytes_per_sec for f in flops),
        mfu=_mean(f.mfu for f in flops),
        hfu=_mean(f.hfu for f in flops),
        mfu_of_measured_peak=_mean(f.mfu_of_measured_peak for f in flops),
        bandwidth_fraction=_mean(f.bandwidth_fraction for f in flops),
    )


def _merge_energy(
    runs: Sequence[RankRun], results: Sequence[Result], metered: Sequence[int], samples: int, flops: float
) -> Energy:
    sections = [results[k].energy for k in metered]
    missing = next((s for s in sections if s.joules is None), None)
    if missing is not None or not sections:
        return missing or results[0].energy
    several_hosts = len({runs[k].hostname for k in metered}) > 1
    per_domain: dict[str, float] = {}
    for k, section in zip(metered, sections, strict=True):
        prefix = f"{runs[k].hostname}:" if several_hosts else ""
        for domain, joules in section.per_domain_joules.items():
            per_domain[prefix + domain] = joules
    joules = sum(s.joules or 0.0 for s in sections)
    seconds = max(s.seconds or 0.0 for s in sections)
    return dataclasses.replace(
        sections[0],
        joules=joules,
        seconds=seconds,
        average_watts=joules / seconds if seconds > 0 else None,
        domains=list(per_domain),
        per_domain_joules=per_domain,
        ranks_metered=[runs[k].rank for k in metered],
        samples_per_joule=samples / joules if joules else None,
        flops_per_joule=flops / joules if joules and flops else None,
    )


def _merge_memory(results: Sequence[Result]) -> Memory:
    """Each peak the largest rank's; the RSS covers the process if any rank's does."""
    memory = [r.memory for r in results]
    return dataclasses.replace(
        memory[0],
        device_peak_allocated_bytes=_max(m.device_peak_allocated_bytes for m in memory),
        device_peak_reserved_bytes=_max(m.device_peak_reserved_bytes for m in memory),
        process_peak_rss_bytes=_max(m.process_peak_rss_bytes for m in memory),
        rss_scope="process" if any(m.rss_scope == "process" for m in memory) else memory[0].rss_scope,
    )


def _merge_input(results: Sequence[Result]) -> Input | None:
    if results[0].input is None:
        return None
    from flowrate.measure.inputs import input_bound_level

    sections = [r.input or Input() for r in results]
    share = _mean(s.input_bound_share for s in sections) or 0.0
    return dataclasses.replace(
        sections[0],
        rank=None,
        input_wait_s=_sum(s.input_wait_s for s in sections),
        input_bound_share=share,
        input_bound=input_bound_level(share),
    )


def _warnings(results: Sequence[Result], section: Distributed) -> list[str]:
    """Rank 0's warnings, other ranks' own ones named by rank, and a straggler if there is one."""
    warnings = list(results[0].warnings)
    for rank, result in enumerate(results[1:], start=1):
        warnings += [f"rank {rank}: {w}" for w in result.warnings if w not in results[0].warnings]
    spread, slow = section.rank_spread or 0.0, section.slowest_rank or 0
    if spread >= STRAGGLER_SPREAD and results[0].summary.intervals >= MIN_INTERVALS:
        rates = [rank.samples_per_sec or 0.0 for rank in section.ranks]
        fast = max(range(len(rates)), key=rates.__getitem__)
        slow_rate, fast_rate = rates[slow], rates[fast]
        warnings.append(
            f"the ranks' throughput differs by {spread:.0%}: rank {slow} "
            f"{slow_rate:.4g} samples/s, rank {fast} {fast_rate:.4g}; "
            f"a slow rank holds back every synchronized step: look for other load or a throttled device on "
            f"rank {slow}'s host"
        )
    return warnings


def _rank_entry(run: RankRun, result: Result) -> RankFigures:
    s = result.summary
    return RankFigures(
        rank=run.rank,
        local_rank=run.local_rank,
        hostname=run.hostname,
        device=run.device,
        device_name=result.environment.device_name,
        samples_per_sec=s.samples_per_sec,
        median_samples_per_sec=s.median_samples_per_sec,
        rate_samples_per_sec=s.rate_samples_per_sec,
        timed_samples=s.timed_samples,
        timed_duration_s=s.timed_duration_s,
        final_loss=s.final_loss,
        process_peak_rss_bytes=result.memory.process_peak_rss_bytes,
        device_peak_allocated_bytes=result.memory.device_peak_allocated_bytes,
        input_bound_share=result.input.input_bound_share if result.input is not None else None,
        warnings=len(result.warnings),
    )


def _reduction(config: SharedConfig, backend: str) -> str | None:
    if config.mode != Mode.TRAIN:
        return None  # inference: nothing to reduce
    if config.execution == Execution.STREAMING:
        return "per-block all-reduce of the host gradients (gloo), before each block's host update"
    return f"DistributedDataParallel: bucketed all-reduce of the gradients during backward ({backend})"


def _sum(values: Iterable[float | int | None]) -> Any:
    items = list(values)
    return None if not items or any(v is None for v in items) else sum(v for v in items if v is not None)


def _mean(values: Iterable[float | None]) -> float | None:
    items = list(values)
    if not items or any(v is None for v in items):
        return None
    return statistics.fmean(v for v in items if v is not None)


def _max(values: Iterable[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None
