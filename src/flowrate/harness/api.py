"""The public entry points: ``benchmark()`` for a problem and options, ``run_config()`` for a RunConfig.

`flowrate run` calls ``run_config`` too, through flowrate.campaigns.recorded_run, which then keeps
and sends what it returns; flowrate.harness.run does the work of each process.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from flowrate.config import Precision, RunConfig
from flowrate.config.amount import parse_amount
from flowrate.config.prices import Prices, choose, read_prices
from flowrate.errors import ConfigError, FlowrateError
from flowrate.execution.distributed import check_data_parallel_config, data_parallel
from flowrate.harness.run import Hooks, RunObserver, run_process
from flowrate.problems.base import Problem
from flowrate.problems.registry import get_problem
from flowrate.results.cost import cost_of
from flowrate.results.noise import machine
from flowrate.results.schema import IntervalRecord, Result
from flowrate.results.solution import project
from flowrate.results.tensorboard import TensorBoardWriter


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
    observer: RunObserver | None = None,
    unmetered: str | None = None,
) -> Result:
    """Run the benchmark that ``config`` describes.

        ``on_interval`` receives each interval's record at its sample point (live progress);
        ``tensorboard`` names a folder for TensorBoard event files written at every sample point.
        ``data="learnable"`` feeds a fresh batch of the problem's learnable task to every step (made
        inside the timed loop), for `flowrate check`; the default cycles synthetic batches made before
        the clock starts. ``observer`` is asked at every sample point and may stop the run there (not in a
        data-parallel run). ``unmetered``: why the run meters no energy (another process's work falls in
    its window: flowrate.campaigns.process.turns).

        Launched by torchrun, the run is data-parallel (flowrate.execution.distributed): every rank
        returns the merged Result, whose throughput is the sum over ranks, and TensorBoard gets the
        merged intervals from rank 0 when the run ends.
    """
    hooks = Hooks(
        on_interval, clock, argv, data, gemm_peak=measured_gemm_peak, observer=observer, unmetered=unmetered
    )
    prices = read_prices(config.prices) if config.prices is not None else None  # refused before the run
    with data_parallel(config) as dp:
        if dp is None:
            single = dataclasses.replace(hooks, tensorboard=tensorboard)
            return priced(run_process(config, problem, None, single), config, prices)
        check_data_parallel_config(config)
        if config.profile_dir is not None:
            raise ConfigError("profile_dir", "profiles one process: give --profile without torchrun")
        if observer is not None:
            raise FlowrateError(
                "a data-parallel run cannot be stopped at a sample point: one rank would stop alone"
            )
        if problem is None:
            problem = get_problem(config.problem, config.size, config.problem_options)
        config = config.for_problem(problem.modes, problem.default_mode, problem.name)
        dp.check_same_configuration(config, problem)
        result = priced(dp.merge(run_process(config, problem, dp, hooks)), config, prices)
    if tensorboard is not None and dp.rank == 0:
        with TensorBoardWriter(tensorboard) as board:
            for interval in result.intervals:
                board.write(interval)
    return result


def priced(result: Result, config: RunConfig, prices: Prices | None = None) -> Result:
    """``result`` with its cost at the config's prices (flowrate.results.cost: the flags', else the
    --prices file's entry for the machine that ran, flowrate.config.prices) and its projected time
    to solution (flowrate.results.solution), where asked for. ``prices``: the file, read already."""
    if prices is None and config.prices is not None:
        prices = read_prices(config.prices)
    summary, energy = result.summary, result.energy
    chosen = choose(config.price_per_hour, config.energy_price_per_kwh, prices, machine(result))
    cost = cost_of(
        chosen.price_per_hour,
        chosen.energy_price_per_kwh,
        summary.samples_per_sec,
        summary.tokens_per_sec,
        energy.joules,
        energy.average_watts,
    )
    if cost is not None and chosen.source is not None:
        cost = dataclasses.replace(cost, prices_from=chosen.source)
    solution = None
    if config.to_solution is not None:
        amount, unit = parse_amount("to_solution", config.to_solution)
        per_sec = cost.dollars_per_sec if cost is not None else None
        epoch = result.input.samples if result.input is not None else None
        solution = project(amount, unit, summary.samples_per_sec, summary.tokens_per_sec, per_sec, epoch)
    warnings = [*result.warnings, chosen.note] if chosen.note else result.warnings
    return dataclasses.replace(result, cost=cost, solution=solution, warnings=warnings)


# Square GEMM sides for the measured peak: large enough to reach the device's matmul peak.
MEASURED_PEAK_SIDE = {"cuda": 8192, "cpu": 2048}


# The format a precision's matmuls compute in, where its GEMM is another precision's; None: the
# GEMM benchmark has no matmul in that format, and one in another format would not be its peak.
GEMM_PRECISION: dict[Precision, Precision | None] = {
    Precision.INT8_WEIGHTS: Precision.FP32,  # int8 weights dequantized into the fp32 activations' matmul
    Precision.INT8_DYNAMIC: None,  # int8 x int8
    Precision.FP8: None,  # float8 linears: a bf16 GEMM runs at half their rate
}
_NO_GEMM = {Precision.INT8_DYNAMIC: "int8 x int8", Precision.FP8: "fp8"}


def measured_gemm_peak(config: RunConfig, device: torch.device) -> float | str:
    """FLOP/s of a large square GEMM in the format the run's matmuls compute in, on the run's
    device, through PyTorch; or, for a format the GEMM benchmark has no matmul in, why not."""
    precision = GEMM_PRECISION.get(config.precision, config.precision)
    if precision is None:
        return (
            f"--measure-peak: no measured peak for {config.precision}: the GEMM benchmark has no "
            f"{_NO_GEMM[config.precision]} matmul, and one in another format would not be this run's peak"
        )
    return gemm_peak_run(config.replace(precision=precision), device).summary.model_flops_per_sec


def gemm_peak_run(config: RunConfig, device: torch.device) -> Result:
    """--measure-peak's GEMM, run by this process alone on its own device.

    Never data-parallel, even inside a rank of one: a peak is a device's, so the ranks' GEMMs must
    not be summed by a merge, and this rank's ``cuda:LOCAL_RANK`` is not the launch's ``--device``.
    """
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
    return run_process(gemm, None, None, Hooks())
