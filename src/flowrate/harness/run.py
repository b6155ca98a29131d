"""One process's run: settle the config, prepare, preheat and measure, then assemble the Result.

flowrate.harness.api's ``run_config`` calls ``run_process`` once per process: alone, or as one
rank of a data-parallel run (whose ranks' Results it merges).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from flowrate.config import RunConfig
from flowrate.data.feed import DataFeed
from flowrate.errors import ConfigError, FlowrateError
from flowrate.estimate.report import run_estimate
from flowrate.execution.checkpoint import checkpoint_saver
from flowrate.execution.compile import CompileRecord, first_step, open_cache
from flowrate.execution.distributed import DataParallel
from flowrate.execution.factory import run_device
from flowrate.execution.precision import PrecisionPolicy, matmul_settings
from flowrate.harness.prepare import Prepared, oom_says_what_to_lower, prepare_with_batch_search
from flowrate.harness.profiling import Priced, ProfileTarget, profile_steps
from flowrate.harness.recorder import IntervalRecorder
from flowrate.measure import freed_memory, machine_load
from flowrate.measure.device import is_out_of_memory, on_device, synchronizer, torch_threads
from flowrate.measure.energy import open_energy_meter
from flowrate.measure.energy.meter import EnergyMeter, EnergyReading, UnavailableMeter
from flowrate.measure.env import collect_environment, device_name
from flowrate.measure.flops import count_step
from flowrate.measure.inputs import input_report
from flowrate.measure.loop import LoopPlan, LoopRecord, timed_loop
from flowrate.measure.memory import MemoryReport, read_peaks, reset_peaks
from flowrate.measure.op_counter import OpTally
from flowrate.measure.peaks import peak_for
from flowrate.problems.base import Problem
from flowrate.problems.registry import get_problem
from flowrate.results.assemble import Measurements, assemble
from flowrate.results.codec import decode
from flowrate.results.profile import Profile
from flowrate.results.schema import IntervalRecord, Result
from flowrate.results.sections import Compile, Input
from flowrate.results.tensorboard import TensorBoardWriter


class RunObserver(Protocol):
    """Watches a run at each of its sample points and may end it there, before its duration."""

    def at_sample_point(self, record: LoopRecord, so_far: Callable[[], Result]) -> bool:
        """Whether the run stops here; ``so_far`` assembles its Result as measured so far."""
        ...


# A Result assembled inside a longer run: the energy meter reads once, over the whole run.
NOT_METERED = EnergyReading(
    None, 0.0, None, (), {}, reason="measured inside a longer run: energy is metered over the whole run"
)


@dataclass(frozen=True)
class Hooks:
    """What a run is handed besides its config (see flowrate.harness.api.run_config)."""

    on_interval: Callable[[IntervalRecord], None] | None = None
    clock: Callable[[], float] = time.perf_counter
    argv: list[str] | None = None
    data: str = "synthetic"
    tensorboard: str | Path | None = None  # None in a data-parallel run: rank 0 writes the merged one
    # --measure-peak's GEMM benchmark: a run of its own, which flowrate.harness.api supplies; it
    # returns FLOP/s, or why a run in this precision has no measured peak
    gemm_peak: Callable[[RunConfig, torch.device], float | str] | None = None
    observer: RunObserver | None = None  # may stop the run at a sample point
    unmetered: str | None = None  # why the run meters no energy (another process works in its window)


@dataclass(frozen=True)
class _Settled:
    """A run's parts once its config is settled for its problem and device."""

    config: RunConfig
    problem: Problem
    policy: PrecisionPolicy
    dp: DataParallel | None
    hooks: Hooks
    memory_fraction: float | None  # --device-memory-limit as a share of the device's memory


def run_process(config: RunConfig, problem: Problem | None, dp: DataParallel | None, hooks: Hooks) -> Result:
    """One process's run: alone, or as one rank of a data-parallel run (``dp``)."""
    run = _settle(config, problem, dp, hooks)
    config, problem, device = run.config, run.problem, run.policy.device
    kept_earlier = freed_memory.apply(config.freed_memory)  # a warning, or None
    with contextlib.ExitStack() as stack:
        stack.enter_context(on_device(device, run.memory_fraction))  # put back as it was after
        listeners = [hooks.on_interval] if hooks.on_interval is not None else []
        if hooks.tensorboard is not None:
            listeners.append(stack.enter_context(TensorBoardWriter(hooks.tensorboard)).write)
        with matmul_settings(config.precision), torch_threads(config.threads):
            gemm = _measured_peak(run) if config.measure_peak else None
            measured_peak, peak_note = (None, gemm) if isinstance(gemm, str) else (gemm, None)
            prepared, compiled = _prepare(stack, run)
            record, measured = _measure(stack, run, prepared, listeners, measured_peak)
            profiled = _profile(run, prepared) if config.profile_dir is not None else None
        environment = collect_environment(device, hooks.argv)
    result = assemble(config, problem, prepared.built, record, measured, environment)
    result = dataclasses.replace(result, profile=profiled)
    learnable = hooks.data == "learnable"
    estimate = run_estimate(config, problem, prepared.built.batch_size, device, dp is not None, learnable)
    return dataclasses.replace(
        result,
        estimate=estimate,
        compile=Compile(**compiled.to_dict()) if compiled else None,
        warnings=[*result.warnings, *(note for note in (peak_note, kept_earlier) if note)],
    )


def _settle(config: RunConfig, problem: Problem | None, dp: DataParallel | None, hooks: Hooks) -> _Settled:
    """The problem built, the config settled for it, the device checked: refusals come before any work."""
    if hooks.data not in ("synthetic", "learnable"):
        raise FlowrateError(f"unknown data source {hooks.data!r}; use synthetic or learnable")
    if config.data_dir is not None and hooks.data != "synthetic":
        raise ConfigError("data", "feeds `flowrate run` only; a check trains on its problem's learnable task")
    if problem is None:
        problem = get_problem(config.problem, config.size, config.problem_options)
    config = config.for_problem(problem.modes, problem.default_mode, problem.name)
    problem.set_precision(config.precision)
    device = run_device(config, dp)
    fraction = device_memory_fraction(config.device_memory_limit_gib, device)
    return _Settled(config, problem, PrecisionPolicy(config.precision, device), dp, hooks, fraction)


def _prepare(stack: contextlib.ExitStack, run: _Settled) -> tuple[Prepared, CompileRecord | None]:
    """Model, executor and batches, cleaned up whatever happens; the compiled first step timed apart."""
    config, problem, device = run.config, run.problem, run.policy.device
    cache = open_cache(stack, config, config.batch_size or problem.default_batch_size, device_name(device))
    prepared = prepare_with_batch_search(config, problem, run.policy, run.hooks.data, run.dp)
    stack.callback(prepared.executor.finish)  # stop its helper threads, whatever happens
    if prepared.feed is not None:
        stack.callback(prepared.feed.close)  # stop the loader's workers, whatever happens
        prepared.feed.clock = run.hooks.clock
    if cache is None:
        return prepared, None
    # torch.compile compiles on the first step: time it apart
    return prepared, first_step(prepared.executor.step, prepared.batches[0], synchronizer(device), cache)


def _measure(
    stack: contextlib.ExitStack,
    run: _Settled,
    prepared: Prepared,
    listeners: list[Callable[[IntervalRecord], None]],
    measured_peak: float | None,
) -> tuple[LoopRecord, Measurements]:
    """Count the executed FLOPs over one step, then the timed loop with its meters around it."""
    config, device, hooks, executor = run.config, run.policy.device, run.hooks, prepared.executor
    batch_size = prepared.built.batch_size
    operators, count_warning = None, None
    if hooks.data == "synthetic":  # a check's curve must start from the untrained model
        with oom_says_what_to_lower(batch_size, device):
            operators, count_warning = _count_executed_flops(prepared, device)
    peak = peak_for(device_name(device), config.precision)
    if hooks.unmetered is not None:
        meter: EnergyMeter = UnavailableMeter(hooks.unmetered, hooks.clock)
    else:
        meter = open_energy_meter(device, clock=hooks.clock)
    stack.enter_context(contextlib.closing(meter))
    flops_per_sample = run.problem.flops_per_sample(config.settled_mode)
    recorder = IntervalRecorder(flops_per_sample, peak.flops, device, meter, listeners, prepared.feed)

    def measurements(energy: EnergyReading, memory: MemoryReport, **after: Any) -> Measurements:
        """What assemble() gets: at the run's end, or so far (for an observer, at a sample point)."""
        return Measurements(
            intervals=list(recorder.records),
            executed_flops_per_sample=None if operators is None else operators.total_flops / batch_size,
            measured_peak_flops=measured_peak,
            energy=energy,
            memory=memory,
            peak=peak,
            count_warning=count_warning,
            is_benchmark=hooks.data == "synthetic",
            operators=operators,
            **after,
        )

    at_sample_point = None
    if hooks.observer is not None:
        observer, environment = hooks.observer, collect_environment(device, hooks.argv)  # before the clock

        def at_sample_point(record: LoopRecord) -> bool:
            def so_far() -> Result:
                measured = measurements(NOT_METERED, read_peaks(device, rss_reset))
                return assemble(config, run.problem, prepared.built, record, measured, environment)

            return observer.at_sample_point(record, so_far)

    rss_reset = reset_peaks(device)
    load_start = machine_load.sample()
    with oom_says_what_to_lower(batch_size, device):
        record = timed_loop(
            executor.step,
            prepared.batches,
            batch_size,
            synchronizer(device),
            LoopPlan.from_config(config),
            clock=hooks.clock,
            on_interval=recorder,
            on_start=recorder.start,
            checkpoint=checkpoint_saver(config.checkpoint_dir, executor, run.dp, config.keep_checkpoints),
            consensus=run.dp,
            observer=at_sample_point,
        )
    load = machine_load.between(load_start, machine_load.sample())
    energy = meter.stop()
    memory = read_peaks(device, rss_reset)
    executor.finish()
    report = executor.report(len(record.losses) or None)
    inputs = _input_report(prepared.feed, recorder.records) if prepared.feed is not None else None
    return record, measurements(
        energy,
        memory,
        streaming=report,
        inputs=inputs,
        executor_warnings=executor.warnings,
        machine_load=load,
    )


def _profile(run: _Settled, prepared: Prepared) -> Profile:
    """--profile DIR: a few steps profiled after the timed run, whose figures are already taken."""
    config, device = run.config, run.policy.device
    target = ProfileTarget(
        step=prepared.executor.step,
        batches=prepared.batches,
        sync=synchronizer(device),
        device=device,
        precision=config.precision.value,
        synthetic=prepared.feed is None,
        priced=Priced(config, run.problem, prepared.built.batch_size),
    )
    assert config.profile_dir is not None
    with oom_says_what_to_lower(prepared.built.batch_size, device):
        return profile_steps(target, config.profile_dir)


def _measured_peak(run: _Settled) -> float | str:
    """--measure-peak: FLOP/s of a large GEMM here, measured by a run of its own (or why none)."""
    if run.hooks.gemm_peak is None:
        raise FlowrateError("--measure-peak needs the GEMM benchmark that run_config supplies")
    return run.hooks.gemm_peak(run.config, run.policy.device)


def device_memory_fraction(limit_gib: float | None, device: torch.device) -> float | None:
    """--device-memory-limit as the share of the device's memory this process may use (the run
    caps it with measure.device.on_device), or refused before any work."""
    if limit_gib is None:
        return None
    if device.type != "cuda":
        raise ConfigError("device_memory_limit", f"applies to CUDA devices; this run is on {device.type}")
    total = torch.cuda.get_device_properties(device).total_memory
    limit = limit_gib * 2**30
    if limit > total:
        raise ConfigError(
            "device_memory_limit",
            f"{limit_gib:g} GiB is more than the device's {total / 2**30:.1f} GiB",
        )
    return limit / total


def _count_executed_flops(prepared: Prepared, device: torch.device) -> tuple[OpTally | None, str | None]:
    """One real step counted op by op (it also warms up, like preheat)."""
    try:
        tally = count_step(prepared.executor.step, prepared.batches[0])
    except Exception as error:
        if is_out_of_memory(error):
            raise
        return (
            None,
            f"could not count executed FLOPs ({type(error).__name__}: {error}); hardware FLOP/s is empty",
        )
    synchronizer(device)()
    return tally, None


def _input_report(feed: DataFeed, intervals: list[IntervalRecord]) -> tuple[Input, list[str]]:
    """--data: the result's input section and its warnings, from the feed and its waits."""
    loader = feed.loader
    section, warnings = input_report(
        feed.describe(), loader.settings.workers, str(loader.directory), intervals, feed.device
    )
    return decode(Input, section), warnings
