"""The operator table and the step breakdown of a profile, from the profiler's times and the counter.

Each row joins, by operator name, what the profiler measured over the profiled steps (calls and
self time: time spent in the operator itself, not in the operators it called, so the rows add up
to the steps' time without counting anything twice) with what flowrate's dispatch counter
(flowrate.measure.op_counter) counted over as many steps (FLOPs and bytes), places it under the
device's roof (flowrate.measure.roofline) and sets the cost model's time beside it where the cost
model priced it. Rows that are not ATen operators (autograd's engine, the optimizer's step
marker, the host's time between operators inside a step) carry no FLOPs or bytes and sit under
no bound but overhead.

The breakdown sums the rows by bound: compute-bound, memory-bound, and overhead (launch-bound
operators and every framework row); communication is the collectives' rows. On a GPU the
host-to-device copies and the idle time, split by cause, come from the trace's device events
(flowrate.harness.trace_idle, HolisticTraceAnalysis's definitions).

The classes sum the rows by operator class (flowrate.estimate.ops.op_class), the grouping the
cost model's own ops are summed by, so each class's measured time stands beside its predicted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from flowrate.estimate.ops import OP_CLASSES, op_class
from flowrate.harness.trace_idle import DeviceTime
from flowrate.measure.op_counter import OpTally
from flowrate.measure.roofline import COMPUTE, MEMORY, OVERHEAD, Roof, place
from flowrate.results.profile import OpClassTime, ProfileOp, StepBreakdown

BETWEEN_OPERATORS = "(host: between operators)"  # a step's own time outside every event in it
TOP = 5  # operators the summary keeps: the most time lost against their bound
_COLLECTIVE = re.compile(r"c10d|nccl|gloo|all_?reduce|all_?gather|reduce_?scatter|broadcast|all_to_all")


@dataclass(frozen=True)
class Timed:
    """One event name as the profiler measured it over the profiled steps."""

    name: str  # "aten::mm", "Optimizer.step#AdamW.step", BETWEEN_OPERATORS
    calls: int
    seconds: float  # self time


def profiler_name(counted: str) -> str:
    """The profiler's name for an op the counter or the cost model names: aten.mm(.default) is
    aten::mm."""
    namespace, _, rest = counted.partition(".")
    return f"{namespace}::{rest.split('.')[0]}"


def operator_rows(
    timed: Sequence[Timed], tally: OpTally, roof: Roof | None, predicted: Mapping[str, float] | None
) -> list[ProfileOp]:
    """The operator table: one row per profiled name, most time first. ``tally`` is the counter's
    over the profiled steps; ``predicted`` the cost model's seconds per profiler name over them
    (None: not priced)."""
    counted: dict[str, list[int]] = {}
    for op in tally.ops:
        entry = counted.setdefault(profiler_name(op.op), [0, 0])
        entry[0] += op.flops
        entry[1] += op.bytes
    rows = []
    for event in timed:
        flops, nbytes = counted.get(event.name, (0, 0))
        seconds = event.seconds
        placed = place(flops, nbytes, seconds, roof)
        rows.append(
            ProfileOp(
                op=event.name,
                calls=event.calls,
                seconds=seconds,
                flops=flops,
                bytes=nbytes,
                flops_per_sec=flops / seconds if seconds > 0 else None,
                bytes_per_sec=nbytes / seconds if seconds > 0 else None,
                bound=placed.bound,
                bound_s=placed.bound_s if roof is not None else None,
                lost_s=placed.lost_s if roof is not None else None,
                predicted_s=None if predicted is None else predicted.get(event.name),
            )
        )
    rows.sort(key=lambda row: (-row.seconds, row.op))
    return rows


def class_times(rows: Sequence[ProfileOp], predicted: Mapping[str, float] | None) -> list[OpClassTime]:
    """The rows' calls and time per operator class beside ``predicted``, the cost model's seconds
    per class over the profiled steps (None: not priced); in OP_CLASSES order, without the
    classes neither side has."""
    measured: dict[str, tuple[int, float]] = {}
    for row in rows:
        calls, seconds = measured.get(op_class(row.op), (0, 0.0))
        measured[op_class(row.op)] = (calls + row.calls, seconds + row.seconds)
    out = []
    for name in OP_CLASSES:
        calls, seconds = measured.get(name, (0, 0.0))
        priced = None if predicted is None else predicted.get(name, 0.0)
        if calls or priced:
            out.append(OpClassTime(op_class=name, calls=calls, measured_s=seconds, predicted_s=priced))
    return out


def most_lost(rows: Sequence[ProfileOp], top: int = TOP) -> list[ProfileOp]:
    """The ``top`` rows that lose the most time against their bound (none without a roof)."""
    placed = [row for row in rows if row.lost_s is not None]
    return sorted(placed, key=lambda row: (-(row.lost_s or 0.0), row.op))[:top]


def breakdown(
    rows: Sequence[ProfileOp],
    roofed: bool,
    device_type: str,
    synthetic: bool,
    device: DeviceTime | None = None,
) -> StepBreakdown:
    """The profiled steps' time by kind of work (see the module's docstring); ``device`` is what
    the trace's device events show (None: the trace holds none)."""
    notes: dict[str, str] = {}

    def total(bound: str) -> float:
        return sum(row.seconds for row in rows if row.bound == bound and not _COLLECTIVE.search(row.op))

    communication = sum((row.seconds for row in rows if _COLLECTIVE.search(row.op)), 0.0)
    memory: float | None
    overhead: float | None
    if roofed:
        compute, memory, overhead = total(COMPUTE), total(MEMORY), total(OVERHEAD)
    else:
        compute = sum(row.seconds for row in rows if row.flops and not _COLLECTIVE.search(row.op))
        memory = overhead = None
        reason = "no peak: bound unknown, so memory-bound work cannot be told from overhead"
        notes["memory_s"] = notes["overhead_s"] = reason
        notes["compute_s"] = "no peak: the operators that carry FLOPs"
    host_to_device = idle = None
    if device_type == "cpu":
        notes["host_to_device_s"] = "not measurable: on a CPU the batches are already in host memory"
        notes["idle_s"] = "not measurable on a CPU: the host runs the operators itself"
    elif device is None:
        notes["host_to_device_s"] = notes["idle_s"] = "the trace holds no device event"
    else:
        host_to_device, idle = device.host_to_device_s, device.idle_s
    input_wait = 0.0 if synthetic else None
    if synthetic:
        notes["input_wait_s"] = "synthetic batches, made before the run: no input wait"
    else:
        notes["input_wait_s"] = "--data: the run's input section has the measured wait"
    return StepBreakdown(
        compute_s=compute,
        memory_s=memory,
        overhead_s=overhead,
        communication_s=communication,
        host_to_device_s=host_to_device,
        input_wait_s=input_wait,
        idle_s=idle,
        idle_split=device.idle if device is not None and device_type != "cpu" else None,
        notes=notes,
    )
