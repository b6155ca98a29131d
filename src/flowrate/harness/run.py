"""The harness around the timed loop: build, place, preheat, measure, and assemble the Result.

``benchmark()`` is the public entry point; the CLI's `flowrate run` is a thin layer over it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from flowrate._version import __version__
from flowrate.config import AUTO, Execution, Mode, RunConfig
from flowrate.data.feed import DataFeed, open_feed
from flowrate.errors import ConfigError, FlowrateError, OutOfMemory
from flowrate.estimate.report import run_estimate
from flowrate.execution.checkpoint import save_checkpoint
from flowrate.execution.compile import first_step, open_cache
from flowrate.execution.distributed import (
    DataParallel,
    check_data_parallel_config,
    data_parallel,
    per_rank_batch_size,
    unwrap,
)
from flowrate.execution.precision import PrecisionPolicy, check_supported, matmul_settings
from flowrate.execution.resident import ResidentExecutor
from flowrate.execution.streaming import (
    StreamingExecutor,
    check_host_memory,
    check_streamable,
    host_bytes_per_parameter,
)
from flowrate.measure.device import is_out_of_memory, release_memory, resolve_device, synchronizer
from flowrate.measure.energy import EnergyMeter, EnergyReading, open_energy_meter
from flowrate.measure.env import collect_environment, device_name
from flowrate.measure.flops import count_step_flops, flops_report, flops_warnings
from flowrate.measure.inputs import input_report
from flowrate.measure.loop import CHECKPOINT, COMPUTE, BatchStream, Interval, LoopPlan, LoopRecord, timed_loop
from flowrate.measure.memory import MemoryReport, current_bytes, read_peaks, reset_peaks
from flowrate.measure.peaks import PeakLookup, peak_for
from flowrate.measure.stats import measurement_warnings, summarize
from flowrate.problems.base import Batch, Problem
from flowrate.problems.registry import get_problem
from flowrate.results.schema import IntervalRecord, Result, RunSummary
from flowrate.results.tensorboard import TensorBoardWriter

# Distinct synthetic batches cycled through the timed loop, all made before the clock starts.
BATCH_POOL = 2


def benchmark(
    problem: str | Problem = "transformer",
    *,
    on_interval: Callable[[IntervalRecord], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    argv: list[str] | None = None,
    tensorboard: str | Path | None = None,
    **options: Any,
) -> Result:
    """Benchmark a zoo problem (by name, or PATH.py:FACTORY) or a Problem object; return the Result.

    ``options`` are RunConfig fields, e.g. ``mode="infer", batch_size=16, precision="bf16"``.
    """
    hooks: dict[str, Any] = {
        "on_interval": on_interval,
        "clock": clock,
        "argv": argv,
        "tensorboard": tensorboard,
    }
    if isinstance(problem, Problem):
        config = RunConfig(problem=f"python:{type(problem).__qualname__}", **options)
        return run_config(config, problem, **hooks)
    return run_config(RunConfig(problem=problem, **options), **hooks)


def run_config(
    config: RunConfig,
    problem: Problem | None = None,
    *,
    on_interval: Callable[[IntervalRecord], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    argv: list[str] | None = None,
    data: str = "synthetic",
    tensorboard: str | Path | None = None,
) -> Result:
    """Run the benchmark that ``config`` describes.

    ``on_interval`` receives each interval's record at its sample point (live progress);
    ``tensorboard`` names a folder for TensorBoard event files written at every sample point.
    ``data="learnable"`` feeds a fresh batch of the problem's learnable task to every step (made
    inside the timed loop), for `flowrate check`; the default cycles synthetic batches made before
    the clock starts.

    Launched by torchrun, the run is data-parallel (flowrate.execution.distributed): every rank
    returns the merged Result, whose throughput is the sum over ranks, and TensorBoard gets the
    merged intervals from rank 0 when the run ends.
    """
    with data_parallel(config) as dp:
        if dp is None:
            return _run(config, problem, None, on_interval, clock, argv, data, tensorboard)
        check_data_parallel_config(config)
        if problem is None:
            problem = get_problem(config.problem, config.size, config.problem_options)
        config = config.for_problem(problem.modes, problem.default_mode, problem.name)
        dp.check_same_configuration(config, problem)
        result = dp.merge(_run(config, problem, dp, on_interval, clock, argv, data, None))
    if tensorboard is not None and dp.rank == 0:
        with TensorBoardWriter(tensorboard) as board:
            for interval in result.intervals:
                board.write(interval)
    return result


def _run(
    config: RunConfig,
    problem: Problem | None,
    dp: DataParallel | None,
    on_interval: Callable[[IntervalRecord], None] | None,
    clock: Callable[[], float],
    argv: list[str] | None,
    data: str,
    tensorboard: str | Path | None,
) -> Result:
    """One process's run: alone, or as one rank of a data-parallel run (``dp``)."""
    if data not in ("synthetic", "learnable"):
        raise FlowrateError(f"unknown data source {data!r}; use synthetic or learnable")
    if config.data_dir is not None and data != "synthetic":
        raise ConfigError("data", "feeds `flowrate run` only; a check trains on its problem's learnable task")
    if problem is None:
        problem = get_problem(config.problem, config.size, config.problem_options)
    config = config.for_problem(problem.modes, problem.default_mode, problem.name)
    problem.set_precision(config.precision)
    device = dp.device if dp is not None else resolve_device(config.device)
    check_supported(config.precision, device)
    if config.execution is Execution.STREAMING:
        check_streamable(config.precision, device)
    _limit_device_memory(config.device_memory_limit_gib, device)
    policy = PrecisionPolicy(config.precision, device)
    name = device_name(device)
    listeners = [on_interval] if on_interval is not None else []
    with contextlib.ExitStack() as stack:
        if tensorboard is not None:
            listeners.append(stack.enter_context(TensorBoardWriter(tensorboard)).write)
        with matmul_settings(config.precision), _threads(config.threads):
            measured_peak = measured_gemm_peak(config, device) if config.measure_peak else None
            cache = open_cache(stack, config, config.batch_size or problem.default_batch_size, name)
            prepared = _prepare_with_batch_search(config, problem, policy, data, dp)
            if isinstance(prepared.executor, StreamingExecutor):
                stack.callback(prepared.executor.finish)  # stop its host thread, whatever happens
            feed = prepared.batches if isinstance(prepared.batches, DataFeed) else None
            if feed is not None:
                stack.callback(feed.close)  # stop the loader's workers, whatever happens
                feed.clock = clock
            compiled = None
            if cache is not None:  # torch.compile compiles on the first step: time it apart
                sync = synchronizer(device)
                compiled = first_step(prepared.executor.step, prepared.batches[0], sync, cache)
            executed, count_warning = None, None
            if data == "synthetic":  # a check's curve must start from the untrained model
                with _oom_says_what_to_lower(prepared.batch_size, device):
                    executed, count_warning = _count_executed_flops(prepared, device)
            peak = peak_for(name, config.precision)
            meter = stack.enter_context(contextlib.closing(open_energy_meter(device, clock=clock)))
            recorder = IntervalRecorder(
                problem.flops_per_sample(config.settled_mode), peak.flops, device, meter, listeners, feed
            )
            rss_reset = reset_peaks(device)
            with _oom_says_what_to_lower(prepared.batch_size, device):
                record = timed_loop(
                    prepared.executor.step,
                    prepared.batches,
                    prepared.batch_size,
                    synchronizer(device),
                    _plan(config),
                    clock=clock,
                    on_interval=recorder,
                    on_start=recorder.start,
                    checkpoint=_checkpoint_saver(config, prepared.executor, dp),
                    consensus=dp,
                )
            energy = meter.stop()
            memory = read_peaks(device, rss_reset)
            streaming = _finish_streaming(prepared.executor, record)
            inputs = _input_report(feed, recorder.records) if feed is not None else None
        environment = collect_environment(device, argv)
    measurements = Measurements(
        recorder.records,
        executed,
        measured_peak,
        energy,
        memory,
        peak,
        count_warning,
        data == "synthetic",
        streaming,
        inputs,
    )
    result = assemble(config, problem, prepared, record, measurements, environment)
    estimate = run_estimate(config, problem, prepared.batch_size, device, dp is not None, data == "learnable")
    return dataclasses.replace(result, estimate=estimate, compile=compiled.to_dict() if compiled else None)


Executor = ResidentExecutor | StreamingExecutor


@dataclass
class Prepared:
    """What a run measures: the executor, its batches and what was built (also a user loop's)."""

    executor: Executor
    batches: Sequence[Batch]
    batch_size: int
    search: list[dict[str, Any]]
    parameters_built: int
    block_count: int | None  # None: the problem declares no blocks (fine for resident runs)


def _prepare_with_batch_search(
    config: RunConfig, problem: Problem, policy: PrecisionPolicy, data: str, dp: DataParallel | None = None
) -> Prepared:
    """Build model, executor and batches; with batch size "auto", halve until one step fits."""
    if config.batch_size != AUTO:
        batch_size = per_rank_batch_size(config, problem, dp.world_size if dp is not None else 1)
        with _oom_says_what_to_lower(batch_size, policy.device):
            return _prepare(config, problem, policy, batch_size, data, trial_step=False, dp=dp)
    search: list[dict[str, Any]] = []
    batch_size = config.max_batch_size
    while batch_size >= 1:
        try:
            prepared = _prepare(config, problem, policy, batch_size, data, trial_step=True)
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
    config: RunConfig,
    problem: Problem,
    policy: PrecisionPolicy,
    batch_size: int,
    data: str,
    trial_step: bool,
    dp: DataParallel | None = None,
) -> Prepared:
    """Model, executor and batches; a data-parallel rank reduces gradients with the others and
    makes its own data (seed + rank; a dataset's loader reads the rank's own shards)."""
    device = policy.device
    streaming = config.execution is Execution.STREAMING
    if streaming:  # the model is built in host memory: it may not fit on the device
        per_parameter = host_bytes_per_parameter(config.settled_mode, config.precision, config.optimizer)
        check_host_memory(problem.parameter_count(), per_parameter)
    torch.manual_seed(config.seed)
    with torch.device("cpu" if streaming else device):
        model = problem.build_model()
    parameters_built = sum(p.numel() for p in model.parameters())
    block_count = _count_blocks(problem, model)
    executor: Executor
    if streaming:
        executor = StreamingExecutor(
            problem,
            model,
            policy,
            config.settled_mode,
            config.optimizer,
            config.learning_rate,
            recompute=config.recompute,
            clip_grad_norm=config.clip_grad_norm,
            reduce_gradients=dp.average_host_gradients if dp is not None else None,
        )
    else:
        executor = ResidentExecutor(
            problem,
            model,
            policy,
            config.settled_mode,
            config.optimizer,
            config.learning_rate,
            clip_grad_norm=config.clip_grad_norm,
            compile=config.compile,
        )
        if dp is not None and executor.optimizer is not None:
            executor.model = dp.wrap(executor.model)
    seed = config.seed + (dp.rank if dp is not None else 0)
    generator = torch.Generator(device=device).manual_seed(seed)
    batches: Sequence[Batch]
    if data == "learnable":
        batches = LearnableStream(problem, batch_size, device, generator)
    elif config.data_dir is not None:  # --data: each step's batch from the loader
        batches = open_feed(config, problem, batch_size, device, generator)
    else:
        batches = [problem.make_batch(batch_size, device, generator) for _ in range(BATCH_POOL)]
    if trial_step:
        executor.step(batches[0])
        synchronizer(device)()
    return Prepared(executor, batches, batch_size, [], parameters_built, block_count)


class LearnableStream(BatchStream):
    """An endless sequence of fresh learnable batches: item i is made when step i asks for it."""

    def __init__(
        self, problem: Problem, batch_size: int, device: torch.device, generator: torch.Generator
    ) -> None:
        self.problem = problem
        self.batch_size = batch_size
        self.device = device
        self.generator = generator

    def next_batch(self) -> Batch:
        return self.problem.learnable_batch(self.batch_size, self.device, self.generator)


def _count_blocks(problem: Problem, model: torch.nn.Module) -> int | None:
    try:
        return len(problem.blocks(model))
    except FlowrateError:
        return None


def _count_executed_flops(prepared: Prepared, device: torch.device) -> tuple[float | None, str | None]:
    """Executed FLOPs per sample, counted over one real step (it also warms up, like preheat)."""
    try:
        total = count_step_flops(prepared.executor.step, prepared.batches[0], device)
    except Exception as error:
        if is_out_of_memory(error):
            raise
        return (
            None,
            f"could not count executed FLOPs ({type(error).__name__}: {error}); hardware FLOP/s is empty",
        )
    synchronizer(device)()
    return total / prepared.batch_size, None


def _checkpoint_saver(
    config: RunConfig, executor: Executor, dp: DataParallel | None
) -> Callable[[int], None] | None:
    """Saves every --checkpoint-every steps; in a data-parallel run rank 0 saves (the weights are
    the same on every rank) while the others wait for it, so every rank times the same interval."""
    if config.checkpoint_dir is None:
        return None
    directory = Path(config.checkpoint_dir)

    def save(step: int) -> None:
        if dp is not None and dp.rank != 0:
            dp.barrier()
            return
        if isinstance(executor, StreamingExecutor):  # the fp32 masters and per-block optimizers
            with executor.master_weights() as model:
                optimizers = executor.updater.optimizers if executor.updater else []
                save_checkpoint(directory, step, model, [o for o in optimizers if o is not None])
        else:
            save_checkpoint(directory, step, unwrap(executor.model), executor.optimizer)
        if dp is not None:
            dp.barrier()

    return save


def _limit_device_memory(limit_gib: float | None, device: torch.device) -> None:
    """--device-memory-limit: cap this process's share of the device's memory."""
    if limit_gib is None:
        return
    if device.type != "cuda":
        raise ConfigError("device_memory_limit", f"applies to CUDA devices; this run is on {device.type}")
    total = torch.cuda.get_device_properties(device).total_memory
    limit = limit_gib * 2**30
    if limit > total:
        raise ConfigError(
            "device_memory_limit",
            f"{limit_gib:g} GiB is more than the device's {total / 2**30:.1f} GiB",
        )
    torch.cuda.set_per_process_memory_fraction(limit / total, device)


def _finish_streaming(executor: Executor, record: LoopRecord) -> dict[str, Any] | None:
    """The streaming executor's account of the timed steps (None for resident runs)."""
    if not isinstance(executor, StreamingExecutor):
        return None
    executor.finish()
    timed = len(record.losses) or None
    return executor.report(timed)


class InputWaits(Protocol):
    """The input pipeline's waits, as the recorder reads them: a DataFeed, or a session's loader."""

    def start(self) -> None: ...

    def take_wait(self) -> float: ...


class IntervalRecorder:
    """Turns each Interval into its IntervalRecord at the sample point and hands it on."""

    def __init__(
        self,
        flops_per_sample: int,
        peak_flops: float | None,
        device: torch.device,
        meter: EnergyMeter,
        listeners: list[Callable[[IntervalRecord], None]],
        feed: InputWaits | None = None,
    ) -> None:
        self.flops_per_sample = flops_per_sample
        self.peak_flops = peak_flops
        self.device = device
        self.meter = meter
        self.listeners = listeners
        self.feed = feed
        self.records: list[IntervalRecord] = []

    def start(self) -> None:
        """The clock has started: read the energy counter, forget the loader's waits so far."""
        self.meter.start()
        if self.feed is not None:
            self.feed.start()

    def __call__(self, interval: Interval) -> None:
        reading = interval.reading
        model_rate = reading.local_samples_per_sec * self.flops_per_sample
        allocated, rss = current_bytes(self.device)
        wait = self.feed.take_wait() if self.feed is not None and interval.kind == COMPUTE else None
        record = IntervalRecord(
            index=interval.index,
            kind=interval.kind,
            first_step=interval.first_step,
            steps=interval.steps,
            samples=reading.samples,
            seconds=reading.seconds,
            samples_per_sec=reading.local_samples_per_sec,
            rate_samples_per_sec=reading.rate_samples_per_sec,
            global_samples_per_sec=reading.global_samples_per_sec,
            elapsed_s=reading.elapsed_s,
            after_checkpoint=interval.after_checkpoint,
            loss=interval.loss,
            model_flops_per_sec=model_rate,
            mfu=model_rate / self.peak_flops if self.peak_flops and self.flops_per_sample else None,
            power_w=self.meter.power_watts(),
            device_memory_allocated_bytes=allocated,
            process_rss_bytes=rss,
            input_wait_s=wait,
            input_bound_share=wait / reading.seconds if wait is not None and reading.seconds > 0 else None,
        )
        self.records.append(record)
        for listener in self.listeners:
            listener(record)


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
    streaming: dict[str, Any] | None = None  # the streaming executor's report
    inputs: tuple[dict[str, Any], list[str]] | None = None  # --data: the input section, its warnings


# Square GEMM sides for the measured peak: large enough to reach the device's matmul peak.
MEASURED_PEAK_SIDE = {"cuda": 8192, "cpu": 2048}


def measured_gemm_peak(config: RunConfig, device: torch.device) -> float:
    """FLOP/s of a large square GEMM at the run's precision on the run's device, through PyTorch."""
    side = MEASURED_PEAK_SIDE.get(device.type, 2048)
    gemm = RunConfig(
        problem="gemm",
        problem_options={"m": side, "n": side, "k": side},
        precision=config.precision,
        device=str(device),
        threads=config.threads,
        preheat_steps=2,
        min_steps=3,
        duration_s=1.0,
    )
    return run_config(gemm).summary.model_flops_per_sec


def _plan(config: RunConfig) -> LoopPlan:
    return LoopPlan(
        preheat_steps=config.preheat_steps,
        steps=config.steps,
        min_steps=config.min_steps,
        duration_s=config.duration_s,
        sample_every=config.sample_every,
        target_interval_s=config.target_interval_s,
        smoothing=config.smoothing,
        checkpoint_every=config.checkpoint_every,
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


def assemble(
    config: RunConfig,
    problem: Problem,
    prepared: Prepared,
    record: LoopRecord,
    measured: Measurements,
    environment: dict[str, Any],
) -> Result:
    """The Result of one process's run (flowrate.session builds its user loop's with it too)."""
    intervals = measured.intervals
    compute = [i for i in intervals if i.kind == COMPUTE]
    saves = [i for i in intervals if i.kind == CHECKPOINT]
    if not compute:
        raise FlowrateError("no interval was measured")  # the loop always measures one
    last = intervals[-1]
    stats = summarize([i.samples_per_sec for i in compute])
    mode = config.settled_mode
    flops_per_sample = problem.flops_per_sample(mode)
    tokens = problem.tokens_per_sample
    samples_per_sec = last.global_samples_per_sec
    timed_samples = sum(i.samples for i in compute)
    compute_s = sum(i.seconds for i in compute)
    checkpoint_s = sum(i.seconds for i in saves)
    summary = RunSummary(
        samples_per_sec=samples_per_sec,
        rate_samples_per_sec=last.rate_samples_per_sec,
        steps_per_sec=samples_per_sec / prepared.batch_size,
        tokens_per_sec=samples_per_sec * tokens if tokens else None,
        model_flops_per_sec=samples_per_sec * flops_per_sample,
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
    flops = flops_report(
        peak=measured.peak,
        samples_per_sec=samples_per_sec,
        model_flops_per_sample=flops_per_sample,
        executed_flops_per_sample=measured.executed_flops_per_sample,
        bytes_per_sample=problem.bytes_per_sample(mode),
        bandwidth_kind=problem.bandwidth_kind,
        measured_peak_flops=measured.measured_peak_flops,
    )
    warnings = measurement_warnings(stats, [i.seconds for i in compute]) if measured.is_benchmark else []
    warnings += flops_warnings(flops_per_sample, measured.executed_flops_per_sample)
    if measured.count_warning:
        warnings.append(measured.count_warning)
    if saves:
        warnings.append(
            f"{len(saves)} checkpoint(s) took {checkpoint_s:.3g} s, {summary.checkpoint_overhead:.1%} of the "
            f"timed window: GlobalRate {samples_per_sec:.4g} samples/s includes them, compute throughput "
            f"{summary.compute_samples_per_sec or 0:.4g} samples/s leaves them out"
        )
    if isinstance(prepared.executor, StreamingExecutor):
        warnings += prepared.executor.warnings
    if measured.inputs is not None:
        warnings += measured.inputs[1]
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
        "train_flops_per_sample": problem.train_flops_per_sample() if Mode.TRAIN in problem.modes else None,
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
        flops=dataclasses.asdict(flops),
        energy=energy_section(measured.energy, timed_samples, timed_samples * flops_per_sample),
        memory=dataclasses.asdict(measured.memory),
        streaming=measured.streaming,
        input=measured.inputs[0] if measured.inputs is not None else None,
        run_id=uuid.uuid4().hex[:12],
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        flowrate_version=__version__,
    )


def energy_section(reading: EnergyReading, samples: int, model_flops: float) -> dict[str, Any]:
    """The energy reading with samples/J and FLOP/J over the same window."""
    joules = reading.joules
    return {
        **reading.to_dict(),
        "samples_per_joule": samples / joules if joules else None,
        "flops_per_joule": model_flops / joules if joules and model_flops else None,
    }


def _input_report(feed: DataFeed, intervals: list[IntervalRecord]) -> tuple[dict[str, Any], list[str]]:
    """--data: the result's input section and its warnings, from the feed and its waits."""
    return input_report(feed.describe(), feed.loader.settings.workers, str(feed.loader.directory), intervals)
