"""The harness around the timed loop: build, place, preheat, measure, and assemble the Result.

``benchmark()`` is the public entry point; the CLI's `flowrate run` is a thin layer over it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from flowrate import __version__
from flowrate.config import AUTO, RunConfig
from flowrate.env import collect_environment
from flowrate.errors import FlowrateError, OutOfMemory
from flowrate.execution.precision import PrecisionPolicy, check_supported, matmul_settings
from flowrate.execution.resident import ResidentExecutor
from flowrate.measure.device import is_out_of_memory, release_memory, resolve_device, synchronizer
from flowrate.measure.loop import Interval, LoopPlan, LoopRecord, timed_loop
from flowrate.measure.stats import measurement_warnings, summarize
from flowrate.problems.base import Batch, Problem
from flowrate.problems.registry import get_problem
from flowrate.results.schema import IntervalRecord, Result, RunSummary

# Distinct synthetic batches cycled through the timed loop, all made before the clock starts.
BATCH_POOL = 2


def benchmark(
    problem: str | Problem = "transformer",
    *,
    on_interval: Callable[[Interval], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    argv: list[str] | None = None,
    **options: Any,
) -> Result:
    """Benchmark a zoo problem (by name, or PATH.py:FACTORY) or a Problem object; return the Result.

    ``options`` are RunConfig fields, e.g. ``mode="infer", batch_size=16, precision="bf16"``.
    """
    if isinstance(problem, Problem):
        config = RunConfig(problem=f"python:{type(problem).__qualname__}", **options)
        return run_config(config, problem, on_interval=on_interval, clock=clock, argv=argv)
    config = RunConfig(problem=problem, **options)
    return run_config(config, on_interval=on_interval, clock=clock, argv=argv)


def run_config(
    config: RunConfig,
    problem: Problem | None = None,
    *,
    on_interval: Callable[[Interval], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    argv: list[str] | None = None,
) -> Result:
    """Run the benchmark that ``config`` describes."""
    if problem is None:
        problem = get_problem(config.problem, config.size, config.problem_options)
    config = config.for_problem(problem.modes, problem.default_mode, problem.name)
    device = resolve_device(config.device)
    check_supported(config.precision, device)
    policy = PrecisionPolicy(config.precision, device)
    with matmul_settings(config.precision), _threads(config.threads):
        prepared = _prepare_with_batch_search(config, problem, policy)
        with _oom_says_what_to_lower(prepared.batch_size, device):
            record = timed_loop(
                prepared.executor.step,
                prepared.batches,
                prepared.batch_size,
                synchronizer(device),
                _plan(config),
                clock=clock,
                on_interval=on_interval,
            )
        environment = collect_environment(device, argv)
    return _assemble(config, problem, prepared, record, environment)


@dataclass
class _Prepared:
    executor: ResidentExecutor
    batches: list[Batch]
    batch_size: int
    search: list[dict[str, Any]]
    parameters_built: int
    block_count: int | None  # None: the problem declares no blocks (fine for resident runs)


def _prepare_with_batch_search(config: RunConfig, problem: Problem, policy: PrecisionPolicy) -> _Prepared:
    """Build model, executor and batches; with batch size "auto", halve until one step fits."""
    if config.batch_size != AUTO:
        batch_size = int(config.batch_size or problem.default_batch_size)
        with _oom_says_what_to_lower(batch_size, policy.device):
            return _prepare(config, problem, policy, batch_size, trial_step=False)
    search: list[dict[str, Any]] = []
    batch_size = config.max_batch_size
    while batch_size >= 1:
        try:
            prepared = _prepare(config, problem, policy, batch_size, trial_step=True)
        except Exception as error:
            if not is_out_of_memory(error):
                raise
            search.append({"batch_size": batch_size, "fits": False})
            release_memory(policy.device)
            batch_size //= 2
            continue
        search.append({"batch_size": batch_size, "fits": True})
        prepared.search = search
        return prepared
    raise OutOfMemory(
        f"not even batch size 1 fits on {policy.device}: use a smaller --size, --precision bf16, "
        "or a device with more memory"
    )


def _prepare(
    config: RunConfig, problem: Problem, policy: PrecisionPolicy, batch_size: int, trial_step: bool
) -> _Prepared:
    device = policy.device
    torch.manual_seed(config.seed)
    with torch.device(device):
        model = problem.build_model()
    parameters_built = sum(p.numel() for p in model.parameters())
    block_count = _count_blocks(problem, model)
    executor = ResidentExecutor(
        problem, model, policy, config.settled_mode, config.optimizer, config.learning_rate
    )
    generator = torch.Generator(device=device).manual_seed(config.seed)
    batches = [problem.make_batch(batch_size, device, generator) for _ in range(BATCH_POOL)]
    if trial_step:
        executor.step(batches[0])
        synchronizer(device)()
    return _Prepared(executor, batches, batch_size, [], parameters_built, block_count)


def _count_blocks(problem: Problem, model: torch.nn.Module) -> int | None:
    try:
        return len(problem.blocks(model))
    except FlowrateError:
        return None


def _plan(config: RunConfig) -> LoopPlan:
    return LoopPlan(
        preheat_steps=config.preheat_steps,
        steps=config.steps,
        min_steps=config.min_steps,
        duration_s=config.duration_s,
        sample_every=config.sample_every,
        target_interval_s=config.target_interval_s,
        smoothing=config.smoothing,
    )


@contextlib.contextmanager
def _oom_says_what_to_lower(batch_size: int, device: torch.device) -> Iterator[None]:
    """Turn an out-of-memory failure into a one-line OutOfMemory that says what to lower."""
    try:
        yield
    except Exception as error:
        if not is_out_of_memory(error):
            raise
        raise OutOfMemory(
            f"out of memory at batch size {batch_size} on {device}: lower --batch-size, use "
            "--precision bf16, or let flowrate search with --batch-size auto"
        ) from None


@contextlib.contextmanager
def _threads(threads: int | None) -> Iterator[None]:
    saved = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def _assemble(
    config: RunConfig,
    problem: Problem,
    prepared: _Prepared,
    record: LoopRecord,
    environment: dict[str, Any],
) -> Result:
    if not record.intervals:
        raise FlowrateError("no interval was measured")  # the loop always measures one
    intervals = [
        IntervalRecord(
            index=i.index,
            kind="compute",
            first_step=i.first_step,
            steps=i.steps,
            samples=i.reading.samples,
            seconds=i.reading.seconds,
            samples_per_sec=i.reading.local_samples_per_sec,
            rate_samples_per_sec=i.reading.rate_samples_per_sec,
            global_samples_per_sec=i.reading.global_samples_per_sec,
            elapsed_s=i.reading.elapsed_s,
        )
        for i in record.intervals
    ]
    last = record.intervals[-1].reading
    stats = summarize([i.samples_per_sec for i in intervals])
    flops_per_sample = problem.flops_per_sample(config.settled_mode)
    tokens = problem.tokens_per_sample
    samples_per_sec = last.global_samples_per_sec
    timed_steps = sum(i.steps for i in intervals)
    summary = RunSummary(
        samples_per_sec=samples_per_sec,
        rate_samples_per_sec=last.rate_samples_per_sec,
        steps_per_sec=samples_per_sec / prepared.batch_size,
        tokens_per_sec=samples_per_sec * tokens if tokens else None,
        model_flops_per_sec=samples_per_sec * flops_per_sample,
        median_samples_per_sec=stats.median,
        mean_samples_per_sec=stats.mean,
        stdev_samples_per_sec=stats.stdev,
        cv=stats.cv,
        min_samples_per_sec=stats.min,
        max_samples_per_sec=stats.max,
        p5_samples_per_sec=stats.p5,
        p95_samples_per_sec=stats.p95,
        ci95_low_samples_per_sec=stats.ci95_low,
        ci95_high_samples_per_sec=stats.ci95_high,
        timed_steps=timed_steps,
        timed_samples=sum(i.samples for i in intervals),
        timed_duration_s=last.elapsed_s,
        intervals=len(intervals),
        sample_every_steps=record.sample_every,
        preheat_steps=config.preheat_steps,
        preheat_s=record.preheat_s,
        final_loss=record.losses[-1] if record.losses else None,
    )
    warnings = measurement_warnings(stats, [i.seconds for i in intervals])
    declared = problem.parameter_count()
    if declared != prepared.parameters_built:
        warnings.append(
            f"the problem declares {declared:,} parameters but its model has "
            f"{prepared.parameters_built:,}; fix its parameter_count()"
        )
    problem_info = {
        "name": problem.name,
        "size": problem.size,
        "spec": config.problem,
        "parameters": declared,
        "parameters_built": prepared.parameters_built,
        "forward_flops_per_sample": problem.forward_flops_per_sample(),
        "train_flops_per_sample": problem.train_flops_per_sample(),
        "model_flops_per_sample": flops_per_sample,
        "tokens_per_sample": tokens,
        "blocks": prepared.block_count,
        "settings": problem.describe(),
    }
    return Result(
        config=config.to_dict(),
        problem=problem_info,
        batch_size=prepared.batch_size,
        environment=environment,
        intervals=intervals,
        losses=record.losses,
        summary=summary,
        warnings=warnings,
        batch_size_search=prepared.search,
        run_id=uuid.uuid4().hex[:12],
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        flowrate_version=__version__,
    )
