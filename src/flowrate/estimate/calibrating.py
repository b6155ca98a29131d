"""`flowrate estimate --calibrate`: a device's rates and overhead terms (flowrate.estimate.calibration),
then the overhead terms' working-set factors from the two reference models
(flowrate.estimate.reference), each priced with those rates and terms."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from flowrate.config import FreedMemory, Mode, OptimizerName, Precision
from flowrate.estimate.calibration import Calibration, measure_rates, save_calibration
from flowrate.estimate.cost import estimate_step
from flowrate.estimate.devices import device_model
from flowrate.estimate.probes import Timer
from flowrate.estimate.reference import SIZES, bytes_per_kernel, reference_step, working_set_factor
from flowrate.estimate.trace import trace_step
from flowrate.measure import freed_memory
from flowrate.measure.device import resolve_device, synchronizer, torch_threads

# Timing a reference: the fastest of 5 rounds of 60 ms (its step takes a few ms on a CPU)
REFERENCE_BUDGET_S, REFERENCE_ROUNDS = 0.3, 5


def calibrate(
    device: torch.device,
    *,
    seconds_per_point: float = 0.04,
    on_point: Callable[[str], None] | None = None,
) -> Calibration:
    """Measure ``device``'s rates, overhead terms and their working-set factors. The larger
    reference model's training step is timed at the start and, with the smaller
    one for the working-set curve, at the end (Calibration.speed_moved): a VM can run such steps
    1.5-1.8x slower for seconds to minutes (benchmarks/notes/, thirteenth and fourteenth
    sessions), and rates measured across such a change mix two machines. The process keeps freed
    host memory from here on, as the runs the rates will price do, and as both ends of that check
    see it."""
    freed_memory.apply(FreedMemory.KEEP)
    timer = Timer(synchronizer(device), REFERENCE_BUDGET_S, rounds=REFERENCE_ROUNDS)
    steps = [reference_step(problem, device) for problem in SIZES]
    start_s = timer.seconds(steps[-1])
    calibration = measure_rates(device, seconds_per_point=seconds_per_point, on_point=on_point)
    measured = [timer.seconds(step) for step in steps]
    curve = working_set_curve(calibration, measured)
    if on_point is not None:
        each = ", ".join(f"x{factor:.3g} at {size / 1e3:.0f} KB" for size, factor in curve)
        on_point(f"the reference models' framework time per kernel's bytes: {each}")
    assert calibration.overheads is not None  # measure_rates always measures them
    overheads = dataclasses.replace(calibration.overheads, working_set=curve)
    return dataclasses.replace(calibration, overheads=overheads, speed_moved=measured[-1] / start_s)


def calibrate_and_save(
    device_name: str,
    threads: int | None = None,
    *,
    on_start: Callable[[str, int], None] | None = None,
    on_point: Callable[[str], None] | None = None,
) -> tuple[Calibration, Path]:
    """Calibrate the device ``device_name`` names (auto, cpu, cuda, cuda:N) with ``threads`` CPU
    threads (None: PyTorch's), and save it where estimates read calibrations: the calibration and
    its file. ``on_start`` is told the device and the thread count before anything is timed."""
    device = resolve_device(device_name)
    with torch_threads(threads):
        if on_start is not None:
            on_start(str(device), torch.get_num_threads())
        calibration = calibrate(device, on_point=on_point)
    return calibration, save_calibration(calibration)


def working_set_curve(
    calibration: Calibration, measured_s: Sequence[float]
) -> tuple[tuple[float, float], ...]:
    """[(bytes per kernel, working-set factor)] of the reference models (reference.SIZES): each
    one's training step as measured (``measured_s``, in SIZES' order) against its price with
    ``calibration``'s rates and overhead terms (measure_rates': no factor yet). The training step
    is timed because its framework share is the larger, so the factor is better determined; one
    curve serves both modes, as the same framework code meets the same caches."""
    model = device_model(calibration.device, None, calibration, calibration.memory_capacity)
    points = []
    for problem, seconds in zip(SIZES, measured_s, strict=True):
        trace = trace_step(
            problem,
            mode=Mode.TRAIN,
            precision=Precision.FP32,
            optimizer=OptimizerName.ADAMW,
            batch_size=problem.default_batch_size,
        )
        priced = estimate_step(trace, model).terms
        points.append((bytes_per_kernel(trace), working_set_factor(seconds, priced)))
    return tuple(sorted(points))
