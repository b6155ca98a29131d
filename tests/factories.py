"""Results with chosen figures, for tests that plot, rank, compare or report runs without running.

The intervals are consistent with each other (seconds from samples and rate, GlobalRate from the
totals, Rate smoothed as flowrate.measure.rate does), so anything derived from them is meaningful.
The summary is derived from them by flowrate's own assemble (flowrate.results.assemble), as a
run's is; the sections given as figures (energy, MFU, memory, fidelity) are taken as given.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import nn

from flowrate.config import RunConfig
from flowrate.measure.energy import EnergyReading
from flowrate.measure.loop import LoopRecord
from flowrate.measure.memory import MemoryReport
from flowrate.measure.peaks import PeakLookup
from flowrate.problems.base import Batch, Problem
from flowrate.results.assemble import Built, Measurements, assemble
from flowrate.results.codec import encode
from flowrate.results.configs import config_from
from flowrate.results.environment import environment_from
from flowrate.results.schema import IntervalRecord, Result
from flowrate.results.sections import Energy, Fidelity, Flops, Kind, Memory, ProblemInfo

_ids = itertools.count(1)
SMOOTHING = 0.4
FLOPS_PER_SAMPLE = 100_000  # the model FLOPs of one sample of every made result
PARAMETERS = 26506


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
    intervals = make_intervals([float(r) for r in interval_rates], batch_size, checkpoint_after)
    made = _assembled(intervals, batch_size, problem, size)
    summary = made.summary
    if samples_per_sec is not None:  # GlobalRate as given, and the figures that follow from it
        summary = replace(
            summary,
            samples_per_sec=samples_per_sec,
            steps_per_sec=samples_per_sec / batch_size,
            model_flops_per_sec=samples_per_sec * FLOPS_PER_SAMPLE,
        )
    what = {"problem": problem, "size": size, "mode": mode, "batch_size": batch_size, "precision": precision}
    kind = Kind.RUN if final_loss is None else Kind.CHECK
    return replace(
        made,
        config=config_from(
            kind, {**what, "optimizer": "adamw", "execution": execution, "device": device_type}
        ),
        problem=ProblemInfo(name=problem, size=size, parameters=PARAMETERS, blocks=3),
        environment=environment_from(
            {**_environment(problem, batch_size, device_type, device_name), **(environment or {})}
        ),
        summary=summary,
        warnings=list(warnings),
        flops=Flops(mfu=mfu, model_flops_per_sec=summary.samples_per_sec * FLOPS_PER_SAMPLE),
        energy=_energy(samples_per_joule, summary.timed_samples, summary.timed_duration_s),
        memory=Memory(process_peak_rss_bytes=peak_memory_bytes),
        fidelity=None if final_loss is None else Fidelity(final_loss=final_loss),
        kind=kind,
        run_id=f"{next(_ids):012x}" if run_id is None else run_id,
        created_at=created_at,
        flowrate_version="0.1.0",
    )


class _MadeProblem(Problem):
    """The problem a made result ran: only its name and counts matter."""

    def __init__(self, name: str, size: str) -> None:
        self.name, self.size = name, size

    def build_model(self) -> nn.Module:
        raise NotImplementedError("a made result runs nothing")

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        raise NotImplementedError("a made result runs nothing")

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        raise NotImplementedError("a made result runs nothing")

    def parameter_count(self) -> int:
        return PARAMETERS

    def forward_flops_per_sample(self) -> int:
        return FLOPS_PER_SAMPLE // 3

    def train_flops_per_sample(self) -> int:
        return FLOPS_PER_SAMPLE


def _assembled(intervals: list[IntervalRecord], batch_size: int, problem: str, size: str) -> Result:
    """The Result flowrate's own assemble makes of ``intervals`` (one step each, one preheat step)."""
    compute = [i for i in intervals if i.kind == "compute"]
    record = LoopRecord([], [i.loss for i in compute if i.loss is not None], 0.01, None, 1)
    no_energy = EnergyReading(None, 0.0, None, (), {}, reason="no meter in tests")
    measured = Measurements(
        intervals=intervals,
        executed_flops_per_sample=None,
        measured_peak_flops=None,
        energy=no_energy,
        memory=MemoryReport(None, None, None, "run"),
        peak=PeakLookup(None, None, None, None, "no datasheet peak in tests"),
        count_warning=None,
        is_benchmark=False,
    )
    config = RunConfig(problem=problem, size=size, mode="train", batch_size=batch_size, preheat_steps=1)
    built = Built(batch_size, PARAMETERS, 3)
    return assemble(config, _MadeProblem(problem, size), built, record, measured, {})


def _energy(samples_per_joule: float | None, samples: int, seconds: float) -> Energy:
    """The energy section of a run that reached ``samples_per_joule`` (None: no meter)."""
    if samples_per_joule is None:
        return Energy(reason="no meter in tests")
    joules = samples / samples_per_joule
    return Energy(
        joules=joules,
        seconds=seconds,
        average_watts=joules / seconds,
        method="test",
        domains=["package-0"],
        samples_per_joule=samples_per_joule,
        flops_per_joule=samples_per_joule * FLOPS_PER_SAMPLE,
    )


def _environment(problem: str, batch_size: int, device_type: str, device_name: str) -> dict[str, Any]:
    return {
        "flowrate": {"version": "0.1.0", "commit": None, "dirty": None},
        "command_line": ["flowrate", "run", "-p", problem, "-b", str(batch_size)],
        "python": {"version": "3.11.7", "implementation": "CPython", "executable": "python"},
        "torch": {"version": "2.13.0+cpu", "cuda": None, "num_threads": 2},
        "device": {"type": device_type, "name": device_name},
        "cpu": {"model": "Test CPU", "logical_cores": 2},
        "hostname": "testhost",
    }


def with_figures(result: Result, **changes: Any) -> Result:
    """A copy of ``result`` with some top-level fields replaced (a new run id unless given); a new
    kind without a config retypes the config as a record of that kind reads it."""
    changes.setdefault("run_id", f"{next(_ids):012x}")
    if "kind" in changes and "config" not in changes:
        changes["config"] = config_from(changes["kind"], encode(result.config))
    return replace(result, **changes)
