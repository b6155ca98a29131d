"""The Result of one process's run, from what was built and what was measured.

`flowrate run` (flowrate.harness.run) and a session around the user's own loop
(flowrate.harness.session) both end here, so a Result means the same whichever made it. Only
plain values come in: how the run was built (``Built``), the loop's record, and what was
measured around it (``Measurements``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flowrate._version import __version__
from flowrate.config import Mode, Precision, RunConfig
from flowrate.errors import FlowrateError
from flowrate.measure.census import annotated_ops, census, mixed_mfu_fields
from flowrate.measure.energy import EnergyReading
from flowrate.measure.flops import FlopsReport, flops_report, flops_warnings
from flowrate.measure.loop import CHECKPOINT, COMPUTE, LoopRecord
from flowrate.measure.machine_load import MachineLoad, load_warnings
from flowrate.measure.memory import MemoryReport
from flowrate.measure.op_counter import OpTally
from flowrate.measure.peaks import PeakLookup
from flowrate.measure.stats import Summary, measurement_warnings, summarize
from flowrate.problems.base import Problem
from flowrate.results.environment import Environment, environment_from
from flowrate.results.schema import IntervalRecord, Result, RunSummary
from flowrate.results.sections import (
    BatchSizeTry,
    Census,
    Energy,
    Flops,
    FormatFigures,
    Input,
    Memory,
    Operators,
    OpRow,
    ProblemInfo,
    Streaming,
)


@dataclass(frozen=True)
class Built:
    """What the run measured: the batch size it settled on and the model it built."""

    batch_size: int
    parameters_built: int
    block_count: int | None  # None: the problem declares no blocks (fine for resident runs)
    batch_size_search: list[BatchSizeTry] = field(default_factory=list)  # --batch-size auto's tries
    search_note: str | None = None  # what bounded the search, where the reader should know it


@dataclass
class Measurements:
    """Everything measured around the timed loop that assemble() puts into the Result."""

    intervals: list[IntervalRecord]
    executed_flops_per_sample: float | None
    measured_peak_flops: float | None
    energy: EnergyReading
    memory: MemoryReport
    peak: PeakLookup
    count_warning: str | None
    is_benchmark: bool  # False for a check, whose data is made inside the loop: no timing advice
    streaming: Streaming | None = None  # the executor's report (streaming's; resident has none)
    inputs: tuple[Input, list[str]] | None = None  # the input section, its warnings
    executor_warnings: list[str] = field(default_factory=list)
    operators: OpTally | None = None  # the counted step, op by op (None: not counted)
    machine_load: MachineLoad | None = None  # what else the machine did over the timed window


def assemble(
    config: RunConfig,
    problem: Problem,
    built: Built,
    record: LoopRecord,
    measured: Measurements,
    collected: Mapping[str, Any],
) -> Result:
    """The Result of one process's run (a data-parallel run merges its ranks' afterwards);
    ``collected`` is flowrate.measure.env's account of the environment."""
    intervals = measured.intervals
    compute = [i for i in intervals if i.kind == COMPUTE]
    if not compute:
        raise FlowrateError("no interval was measured")  # the loop always measures one
    stats = summarize([i.samples_per_sec for i in compute])
    summary = _summary(config, problem, built, record, intervals, stats)
    flops_per_sample = problem.flops_per_sample(config.settled_mode)
    flops = _flops(problem, config.settled_mode, measured, summary.samples_per_sec)
    environment = _with_load(collected, measured.machine_load)
    return Result(
        config=config,
        problem=_problem_info(config, problem, built),
        batch_size=built.batch_size,
        environment=environment,
        intervals=intervals,
        losses=record.losses,
        summary=summary,
        warnings=_warnings(config, problem, built, measured, summary, stats, flops),
        batch_size_search=built.batch_size_search,
        flops=Flops(**dataclasses.asdict(flops), **_mixed_mfu(config, measured, environment, flops)),
        energy=energy_section(
            measured.energy, summary.timed_samples, summary.timed_samples * flops_per_sample
        ),
        memory=Memory(**dataclasses.asdict(measured.memory)),
        streaming=measured.streaming,
        input=measured.inputs[0] if measured.inputs is not None else None,
        operators=_operators(config, measured, environment, built.batch_size),
        run_id=uuid.uuid4().hex[:12],
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        flowrate_version=__version__,
    )


def _tf32(config: RunConfig, environment: Environment) -> bool:
    """fp32 matmuls ran as TF32: flowrate turns TF32 on for precision tf32 on CUDA, off otherwise."""
    return config.precision is Precision.TF32 and environment.device_type == "cuda"


def _operators(
    config: RunConfig, measured: Measurements, environment: Environment, batch_size: int
) -> Operators | None:
    """The counted step op by op, each row with its format and accumulate dtype, and the census."""
    tally = measured.operators
    if tally is None:
        return None
    tf32 = _tf32(config, environment)
    counted = census(tally, config.precision.value, tf32)
    shares = counted.flop_shares()
    return Operators(
        batch_size=batch_size,
        flops=tally.total_flops,
        bytes=tally.total_bytes,
        recomputed_flops=tally.recomputed_flops,
        attention_full_flops=tally.attention_full_flops,
        attention_kept_flops=tally.attention_kept_flops,
        counted_ops=tally.counted_ops,
        not_counted=dict(tally.not_counted),
        ops=[OpRow(**row) for row in annotated_ops(tally, tf32)],
        census=Census(
            requested=counted.requested,
            effective=counted.effective,
            tf32=counted.tf32,
            op_calls=counted.op_calls,
            formats={
                fmt: FormatFigures(f.flops, f.bytes, f.calls, shares.get(fmt, 0.0))
                for fmt, f in counted.formats.items()
            },
        ),
    )


def _mixed_mfu(
    config: RunConfig, measured: Measurements, environment: Environment, flops: FlopsReport
) -> dict[str, Any]:
    """MFU against the peak of the format that carried each FLOP (empty, with why, uncounted)."""
    if measured.operators is None:
        return {"mixed_peak_flops": None, "mixed_mfu": None, "mixed_mfu_reason": "the step was not counted"}
    run_census = census(measured.operators, config.precision.value, _tf32(config, environment))
    return mixed_mfu_fields(measured.peak, run_census, flops.model_flops_per_sec)


def energy_section(reading: EnergyReading, samples: int, model_flops: float) -> Energy:
    """The energy reading with samples/J and FLOP/J over the same window."""
    joules = reading.joules
    return Energy(
        **reading.to_dict(),
        samples_per_joule=samples / joules if joules else None,
        flops_per_joule=model_flops / joules if joules and model_flops else None,
    )


def _summary(
    config: RunConfig,
    problem: Problem,
    built: Built,
    record: LoopRecord,
    intervals: list[IntervalRecord],
    stats: Summary,
) -> RunSummary:
    """Throughput as experienced (GlobalRate at the last sample point) and where the time went."""
    compute = [i for i in intervals if i.kind == COMPUTE]
    saves = [i for i in intervals if i.kind == CHECKPOINT]
    last = intervals[-1]
    tokens = problem.tokens_per_sample
    samples_per_sec = last.global_samples_per_sec
    timed_samples = sum(i.samples for i in compute)
    compute_s = sum(i.seconds for i in compute)
    checkpoint_s = sum(i.seconds for i in saves)
    return RunSummary(
        samples_per_sec=samples_per_sec,
        rate_samples_per_sec=last.rate_samples_per_sec,
        steps_per_sec=samples_per_sec / built.batch_size,
        tokens_per_sec=samples_per_sec * tokens if tokens else None,
        model_flops_per_sec=samples_per_sec * problem.flops_per_sample(config.settled_mode),
        **stats.rate_fields(),
        timed_steps=sum(i.steps for i in compute),
        timed_samples=timed_samples,
        timed_duration_s=last.elapsed_s,
        intervals=len(compute),
        sample_every_steps=record.sample_every,
        preheat_steps=config.preheat_steps,
        preheat_s=record.preheat_s,
        final_loss=record.losses[-1] if record.losses else None,
        compute_samples_per_sec=timed_samples / compute_s if compute_s > 0 else None,
        checkpoints=len(saves),
        checkpoint_s=checkpoint_s,
        checkpoint_overhead=checkpoint_s / last.elapsed_s if last.elapsed_s > 0 else 0.0,
    )


def _flops(problem: Problem, mode: Mode, measured: Measurements, samples_per_sec: float) -> FlopsReport:
    return flops_report(
        peak=measured.peak,
        samples_per_sec=samples_per_sec,
        model_flops_per_sample=problem.flops_per_sample(mode),
        executed_flops_per_sample=measured.executed_flops_per_sample,
        bytes_per_sample=problem.bytes_per_sample(mode),
        bandwidth_kind=problem.bandwidth_kind,
        measured_peak_flops=measured.measured_peak_flops,
    )


def _with_load(environment: Mapping[str, Any], load: MachineLoad | None) -> Environment:
    """The environment section (from the collected values) with the machine's load over the timed
    window, where it was read."""
    return environment_from(environment if load is None else {**environment, "machine_load": load.to_dict()})


def _warnings(
    config: RunConfig,
    problem: Problem,
    built: Built,
    measured: Measurements,
    summary: RunSummary,
    stats: Summary,
    flops: FlopsReport,
) -> list[str]:
    """What the reader should know about the figures, each saying what to do about it."""
    compute_seconds = [i.seconds for i in measured.intervals if i.kind == COMPUTE]
    chosen = config.sample_every is not None
    warnings = measurement_warnings(stats, compute_seconds, chosen) if measured.is_benchmark else []
    warnings += flops_warnings(
        flops.model_flops_per_sample,
        measured.executed_flops_per_sample,
        measured.operators,
        batch_size=built.batch_size,
        # --recompute runs the blocks' forward again: at most one more forward per sample
        recompute_allowance=problem.forward_flops_per_sample() if config.recompute else 0,
        model_flops_by_class=problem.flops_by_op_class(config.settled_mode),
    )
    if flops.mfu is None and flops.peak_flops and flops.model_flops_per_sample and flops.reason:
        warnings.append(flops.reason)  # MFU above 100%: withheld
    if measured.count_warning:
        warnings.append(measured.count_warning)
    if built.search_note:
        warnings.append(built.search_note)
    warnings += load_warnings(measured.machine_load)
    if summary.checkpoints:
        warnings.append(
            f"{summary.checkpoints} checkpoint(s) took {summary.checkpoint_s:.3g} s, "
            f"{summary.checkpoint_overhead:.1%} of the timed window: GlobalRate "
            f"{summary.samples_per_sec:.4g} samples/s includes them, compute throughput "
            f"{summary.compute_samples_per_sec or 0:.4g} samples/s leaves them out"
        )
    warnings += measured.executor_warnings
    if measured.inputs is not None:
        warnings += measured.inputs[1]
    declared = problem.parameter_count()
    if declared != built.parameters_built:
        warnings.append(
            f"the problem declares {declared:,} parameters but its model has "
            f"{built.parameters_built:,}; fix its parameter_count()"
        )
    return warnings


def _problem_info(config: RunConfig, problem: Problem, built: Built) -> ProblemInfo:
    mode = config.settled_mode
    return ProblemInfo(
        name=problem.name,
        size=problem.size,
        spec=config.problem,
        parameters=problem.parameter_count(),
        parameters_built=built.parameters_built,
        forward_flops_per_sample=problem.forward_flops_per_sample(),
        train_flops_per_sample=problem.train_flops_per_sample() if Mode.TRAIN in problem.modes else None,
        model_flops_per_sample=problem.flops_per_sample(mode),
        tokens_per_sample=problem.tokens_per_sample,
        blocks=built.block_count,
        settings=problem.describe(),
    )
