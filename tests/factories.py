"""Results with chosen figures, for tests that plot, rank, compare or report runs without running.

The intervals are consistent with each other (seconds from samples and rate, GlobalRate from the
totals, Rate smoothed as flowrate.measure.rate does), so anything derived from them is meaningful.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from flowrate.measure.stats import summarize
from flowrate.results.schema import IntervalRecord, Result, RunSummary

_ids = itertools.count(1)
SMOOTHING = 0.4


def make_intervals(
    rates: Sequence[float], batch_size: int, checkpoint_after: Sequence[int] = (), checkpoint_s: float = 0.05
) -> list[IntervalRecord]:
    """Compute intervals of one step each at ``rates`` samples/s; a checkpoint interval after the
    compute intervals whose positions are in ``checkpoint_after``."""
    out: list[IntervalRecord] = []
    elapsed = 0.0
    samples = 0
    smoothed: float | None = None
    after = False
    for position, local in enumerate(rates):
        seconds = batch_size / local
        elapsed += seconds
        samples += batch_size
        smoothed = local if smoothed is None else (1 - SMOOTHING) * local + SMOOTHING * smoothed
        out.append(
            IntervalRecord(
                index=len(out),
                kind="compute",
                first_step=position,
                steps=1,
                samples=batch_size,
                seconds=seconds,
                samples_per_sec=local,
                rate_samples_per_sec=smoothed,
                global_samples_per_sec=samples / elapsed,
                elapsed_s=elapsed,
                after_checkpoint=after,
                loss=2.0 / (1 + position),
                model_flops_per_sec=local * 1e5,
            )
        )
        after = False
        if position in checkpoint_after:
            elapsed += checkpoint_s
            out.append(
                IntervalRecord(
                    index=len(out),
                    kind="checkpoint",
                    first_step=position + 1,
                    steps=0,
                    samples=0,
                    seconds=checkpoint_s,
                    samples_per_sec=0.0,
                    rate_samples_per_sec=smoothed,
                    global_samples_per_sec=samples / elapsed,
                    elapsed_s=elapsed,
                )
            )
            after = True
    return out


def make_result(
    samples_per_sec: float | None = None,
    *,
    interval_rates: Sequence[float] | None = None,
    batch_size: int = 8,
    problem: str = "fc_mnist",
    size: str = "debug",
    mode: str = "train",
    precision: str = "fp32",
    execution: str = "resident",
    device_type: str = "cpu",
    device_name: str = "Test CPU",
    checkpoint_after: Sequence[int] = (),
    samples_per_joule: float | None = None,
    peak_memory_bytes: int | None = 100_000_000,
    mfu: float | None = None,
    final_loss: float | None = None,
    warnings: Sequence[str] = (),
    run_id: str | None = None,
    created_at: str = "2026-11-20T10:00:00+00:00",
    environment: dict[str, Any] | None = None,
) -> Result:
    """A Result whose figures are the ones given.

    ``interval_rates`` are the compute intervals' samples/s; without them, a small spread around
    ``samples_per_sec`` (default 1000). The summary's GlobalRate is ``samples_per_sec`` when given,
    else what the intervals add up to. ``run_id=""`` is kept (a result the store must refuse).
    """
    if interval_rates is None:
        centre = 1000.0 if samples_per_sec is None else samples_per_sec
        interval_rates = [centre * f for f in (0.96, 1.02, 0.99, 1.03, 1.0)]
    rates = [float(r) for r in interval_rates]
    intervals = make_intervals(rates, batch_size, checkpoint_after)
    stats = summarize(rates)
    compute = [i for i in intervals if i.kind == "compute"]
    timed_samples = sum(i.samples for i in compute)
    checkpoint_s = sum(i.seconds for i in intervals if i.kind == "checkpoint")
    duration = intervals[-1].elapsed_s
    if samples_per_sec is None:
        samples_per_sec = timed_samples / duration
    summary = RunSummary(
        samples_per_sec=samples_per_sec,
        rate_samples_per_sec=compute[-1].rate_samples_per_sec,
        steps_per_sec=samples_per_sec / batch_size,
        tokens_per_sec=None,
        model_flops_per_sec=samples_per_sec * 1e5,
        **stats.rate_fields(),
        timed_steps=len(compute),
        timed_samples=timed_samples,
        timed_duration_s=duration,
        intervals=len(compute),
        sample_every_steps=1,
        preheat_steps=1,
        preheat_s=0.01,
        final_loss=compute[-1].loss,
        compute_samples_per_sec=timed_samples / (duration - checkpoint_s),
        checkpoints=len(intervals) - len(compute),
        checkpoint_s=checkpoint_s,
        checkpoint_overhead=checkpoint_s / duration,
    )
    env = {
        "flowrate": {"version": "0.1.0", "commit": None, "dirty": None},
        "command_line": ["flowrate", "run", "-p", problem, "-b", str(batch_size)],
        "python": {"version": "3.11.7", "implementation": "CPython", "executable": "python"},
        "torch": {"version": "2.13.0+cpu", "cuda": None, "num_threads": 2},
        "device": {"type": device_type, "name": device_name},
        "cpu": {"model": "Test CPU", "logical_cores": 2},
        "hostname": "testhost",
    }
    energy: dict[str, Any] = {"joules": None, "samples_per_joule": None, "reason": "no meter in tests"}
    if samples_per_joule is not None:
        joules = timed_samples / samples_per_joule
        energy = {
            "joules": joules,
            "seconds": duration,
            "average_watts": joules / duration,
            "method": "test",
            "domains": ["package-0"],
            "samples_per_joule": samples_per_joule,
            "flops_per_joule": samples_per_joule * 1e5,
        }
    result = Result(
        config={
            "problem": problem,
            "size": size,
            "mode": mode,
            "batch_size": batch_size,
            "precision": precision,
            "optimizer": "adamw",
            "execution": execution,
            "device": device_type,
        },
        problem={"name": problem, "size": size, "parameters": 26506, "blocks": 3},
        batch_size=batch_size,
        environment={**env, **(environment or {})},
        intervals=intervals,
        losses=[i.loss for i in compute if i.loss is not None],
        summary=summary,
        warnings=list(warnings),
        flops={"mfu": mfu, "model_flops_per_sec": samples_per_sec * 1e5},
        energy=energy,
        memory={} if peak_memory_bytes is None else {"process_peak_rss_bytes": peak_memory_bytes},
        fidelity=None if final_loss is None else {"final_loss": final_loss},
        run_id=f"{next(_ids):012x}" if run_id is None else run_id,
        created_at=created_at,
        flowrate_version="0.1.0",
    )
    return result


def with_figures(result: Result, **changes: Any) -> Result:
    """A copy of ``result`` with some top-level fields replaced (a new run id unless given)."""
    changes.setdefault("run_id", f"{next(_ids):012x}")
    return replace(result, **changes)
