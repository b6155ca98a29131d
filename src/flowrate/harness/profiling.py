"""--profile DIR: a few steps profiled with torch.profiler after the timed run, and what they show.

The timed run is over and its figures are taken before this runs, so the profiler never sits
inside a timed interval. The profiler's schedule runs WARMUP_STEPS steps it discards, then
PROFILED_STEPS steps it records, each ended by a device sync. Then flowrate's dispatch counter
(flowrate.measure.op_counter) counts as many steps again, apart: its Python dispatch would
distort the profiled times. Into DIR go:

- trace.pt.trace.json: the Chrome trace (`export_chrome_trace`), which Perfetto opens, and
  TensorBoard's PyTorch profiler view finds by its name (`tensorboard --logdir DIR`);
- operators.json and operators.csv: the operator table (flowrate.harness.profile_table) with
  the roof it was placed under and the step breakdown.

Operator time is self CPU time on a CPU, self device time on a GPU; there the trace's device
events give the breakdown's host-to-device copies and idle time (flowrate.harness.trace_idle).
The roof is the device's datasheet peaks where the peak table has both its FLOP/s and its memory
bandwidth, else a calibration's achieved rates (`flowrate estimate --calibrate`), else none: the
bound is unknown, never guessed. The cost model (flowrate.estimate) prices each operator of its traced step as
estimate_step does (its roofline and the share of its dispatch the step waits for) where it has
a model of the device and the steps are ones it traces (a run's; not a generation's); where not,
its reason is recorded. The framework's per-module, autograd, optimizer and per-step terms
belong to no operator: they are the "framework" class's prediction, beside the time of the
events that are no kernel (flowrate.harness.profile_table.class_times).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from flowrate.config import RunConfig
from flowrate.errors import FlowrateError, PathError
from flowrate.estimate.cost import op_seconds
from flowrate.estimate.devices import local_device
from flowrate.estimate.ops import op_class
from flowrate.estimate.report import trace_for
from flowrate.harness.profile_table import (
    BETWEEN_OPERATORS,
    Timed,
    breakdown,
    class_times,
    most_lost,
    operator_rows,
    profiler_name,
)
from flowrate.harness.trace_idle import device_time
from flowrate.io import write_atomic
from flowrate.measure.env import device_name
from flowrate.measure.op_counter import count_ops
from flowrate.measure.peaks import peak_for, precision_key
from flowrate.measure.roofline import LAUNCH_FACTOR, Roof
from flowrate.problems.base import Problem
from flowrate.results.profile import Profile, ProfileOp

WARMUP_STEPS = 1
PROFILED_STEPS = 3
TRACE = "trace.pt.trace.json"
TABLE_JSON = "operators.json"
TABLE_CSV = "operators.csv"
_STEP = "ProfilerStep*"  # the profiler's own event around each step, as key_averages names it


@dataclasses.dataclass(frozen=True)
class Priced:
    """What the cost model prices the profiled steps from: the run's configuration, problem and
    batch size."""

    config: RunConfig
    problem: Problem
    batch_size: int


@dataclasses.dataclass(frozen=True)
class ProfileTarget:
    """What the profile runs and prices: the step, its batches, and how the cost model prices it."""

    step: Callable[[Any], Any]  # one step of one batch (a run's Batch, a generation's prompts)
    batches: Sequence[Any]
    sync: Callable[[], None]
    device: torch.device
    precision: str  # the roof's: the precision the step computes in
    synthetic: bool  # batches made before the run (no input wait)
    priced: Priced | str  # str: why the cost model cannot price these steps
    unit: str = ""  # what one step is, where it is not a run's step (Profile.unit)


def profile_steps(target: ProfileTarget, directory: str) -> Profile:
    """Profile the run's step after its timed loop; write the files into ``directory``."""
    folder = Path(directory)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise PathError(f"--profile: cannot make {folder}", error) from None
    timed, step_s, trace = _profiled(target)
    write_atomic(folder / TRACE, trace)
    _, tally = count_ops(lambda: _run(target, PROFILED_STEPS))
    roof, roof_reason = roof_for(target.device, target.precision)
    predicted, by_class, cost_reason = _predicted(target)
    rows = operator_rows(timed, tally, roof, predicted)
    kind = "self device time" if target.device.type == "cuda" else "self CPU time"
    summary = Profile(
        directory=str(folder),
        files=[TRACE, TABLE_JSON, TABLE_CSV],
        steps=PROFILED_STEPS,
        warmup_steps=WARMUP_STEPS,
        seconds=step_s,
        time_kind=kind,
        peak_flops=roof.peak_flops if roof else None,
        peak_bandwidth=roof.peak_bandwidth if roof else None,
        roof_source=roof.source if roof else None,
        roof_reason=roof_reason,
        launch_factor=LAUNCH_FACTOR,
        cost_model_reason=cost_reason,
        breakdown=breakdown(
            rows,
            roof is not None,
            target.device.type,
            target.synthetic,
            device_time(json.loads(trace)) if target.device.type == "cuda" else None,
        ),
        top_lost=most_lost(rows),
        classes=class_times(rows, by_class),
        unit=target.unit,
    )
    write_atomic(folder / TABLE_JSON, json.dumps(_table_json(summary, rows), indent=2) + "\n")
    write_atomic(folder / TABLE_CSV, table_csv(rows))
    return summary


def _run(target: ProfileTarget, steps: int, after_each: Callable[[], None] | None = None) -> None:
    for n in range(steps):
        target.step(target.batches[n % len(target.batches)])
        target.sync()
        if after_each is not None:
            after_each()


def _profiled(target: ProfileTarget) -> tuple[list[Timed], float, str]:
    """The profiled steps' events (self time per name), their wall time and the Chrome trace."""
    activities = [ProfilerActivity.CPU]
    if target.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    taken: dict[str, Any] = {}

    def ready(profiler: profile) -> None:
        taken["averages"] = profiler.key_averages()
        with tempfile.TemporaryDirectory() as scratch:  # the profiler writes the file itself
            path = Path(scratch) / TRACE
            profiler.export_chrome_trace(str(path))
            taken["trace"] = path.read_text(encoding="utf-8")

    plan = schedule(wait=0, warmup=WARMUP_STEPS, active=PROFILED_STEPS, repeat=1)
    with profile(activities=activities, schedule=plan, on_trace_ready=ready) as profiler:
        _run(target, WARMUP_STEPS + PROFILED_STEPS, profiler.step)
    if "averages" not in taken:
        raise FlowrateError("--profile: torch.profiler recorded no steps")
    on_device = target.device.type == "cuda"
    timed, step_s = [], 0.0
    for event in taken["averages"]:
        if event.device_type != torch.autograd.DeviceType.CPU:
            continue  # a kernel: its time is its operator's self device time
        seconds = (event.self_device_time_total if on_device else event.self_cpu_time_total) / 1e6
        if event.key == _STEP:
            step_s = event.cpu_time_total / 1e6
            timed.append(Timed(BETWEEN_OPERATORS, event.count, event.self_cpu_time_total / 1e6))
        else:
            timed.append(Timed(event.key, event.count, seconds))
    return timed, step_s, taken["trace"]


def roof_for(device: torch.device, precision: str) -> tuple[Roof | None, str | None]:
    """The roof operators are placed under: the datasheet's peaks, else a calibration's rates."""
    name = device_name(device)
    peak = peak_for(name, precision)
    if peak.flops is not None and peak.memory_bandwidth:
        entry = peak.entry
        return Roof(peak.flops, peak.memory_bandwidth, entry.source if entry else name), None
    try:
        model = local_device(device)
        return Roof(
            model.large_flop_rate(precision_key(precision)),
            max(rate for _, rate in model.bandwidth),
            model.basis,
        ), None
    except FlowrateError as error:
        return None, f"no peak: bound unknown ({error})"


def _predicted(
    target: ProfileTarget,
) -> tuple[dict[str, float] | None, dict[str, float] | None, str | None]:
    """The cost model's seconds over the profiled steps per profiler name and per operator class
    (the framework's terms its own class), or why none."""
    if isinstance(target.priced, str):
        return None, None, target.priced
    priced = target.priced
    try:
        model = local_device(target.device)
        trace = trace_for(priced.config, priced.problem, priced.batch_size, model)
        per_op, framework = op_seconds(trace, model)
    except FlowrateError as error:
        return None, None, f"the cost model cannot price this run: {error}"
    by_name: dict[str, float] = {}
    by_class = {"framework": framework * PROFILED_STEPS}
    for op, seconds in zip(trace.ops, per_op, strict=True):
        name, kind = profiler_name(op.name), op_class(op.name)
        by_name[name] = by_name.get(name, 0.0) + seconds * PROFILED_STEPS
        by_class[kind] = by_class.get(kind, 0.0) + seconds * PROFILED_STEPS
    return by_name, by_class, None


COLUMNS = [f.name for f in dataclasses.fields(ProfileOp)]


def table_csv(rows: Sequence[ProfileOp]) -> str:
    """The operator table as CSV, one row per operator, the fields of ProfileOp as columns."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow(["" if v is None else v for v in dataclasses.astuple(row)])
    return out.getvalue()


def _table_json(summary: Profile, rows: Sequence[ProfileOp]) -> dict[str, Any]:
    data = dataclasses.asdict(summary)
    data["operators"] = [dataclasses.asdict(row) for row in rows]
    return data
