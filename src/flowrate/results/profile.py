"""The record's profile section (--profile DIR): a summary of the steps profiled after the timed run.

The whole operator table and the trace are files in DIR (flowrate.harness.profiling); the record
keeps what a reader shows: the step breakdown, the roof the operators were placed under, the
operators that lose the most time against their bound, and the time per operator class beside
the cost model's. Records without it read with it None.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProfileOp:
    """One operator over the profiled steps: its measured time beside its roofline bound."""

    op: str  # the profiler's name: "aten::mm", or a framework event ("Optimizer.step#AdamW.step")
    calls: int
    seconds: float  # self time: on the device where there is one, else on the CPU
    flops: int  # flowrate's dispatch counter over the profiled steps
    bytes: int
    flops_per_sec: float | None
    bytes_per_sec: float | None
    bound: str  # compute, memory, overhead or unknown (flowrate.measure.roofline)
    bound_s: float | None  # the least time the roof allows; None: no roof
    lost_s: float | None  # seconds - bound_s
    predicted_s: float | None = None  # the cost model's time for these calls; None: not priced


@dataclass(frozen=True)
class OpClassTime:
    """One class of operators (flowrate.estimate.ops.OP_CLASSES) over the profiled steps: the
    profiler's time beside the cost model's, for `flowrate estimate --check`'s per-operator view."""

    op_class: str  # matmul, conv, attention, embedding, copy, elementwise, optimizer, view, framework
    calls: int  # the profiled events of the class
    measured_s: float  # the table's rows of the class: self time, as ProfileOp.seconds
    predicted_s: float | None  # the cost model's ops of the class; None: not priced (cost_model_reason)


@dataclass(frozen=True)
class IdleSplit:
    """A device's idle time by cause, as HolisticTraceAnalysis splits it
    (flowrate.harness.trace_idle): seconds summed over its streams."""

    host_wait_s: float  # the host had not yet launched the next kernel
    kernel_wait_s: float  # short gaps between kernels launched back to back
    other_s: float  # any other gap (a kernel waiting on another stream, say)

    def parts(self) -> tuple[tuple[str, float], ...]:
        """Each cause's label and seconds, in the order readers show them."""
        return (("host wait", self.host_wait_s), ("kernel wait", self.kernel_wait_s), ("other", self.other_s))


@dataclass(frozen=True)
class StepBreakdown:
    """Where the profiled steps' time went, in seconds; None where it cannot be measured here,
    with the reason in ``notes`` (keyed by the field's name)."""

    compute_s: float | None = None  # compute-bound operators
    memory_s: float | None = None  # memory-bound operators
    overhead_s: float | None = None  # launch/overhead-bound operators and framework events
    communication_s: float | None = None
    host_to_device_s: float | None = None
    input_wait_s: float | None = None
    idle_s: float | None = None  # the device's idle time: the sum of idle_split's
    idle_split: IdleSplit | None = None  # None: idle_s not measured (its note says why)
    notes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Profile:
    """--profile DIR: what the profiled steps measured and where their files are."""

    directory: str = ""
    files: list[str] = field(default_factory=list)  # names inside ``directory``
    steps: int = 0  # profiled (active) steps, after warmup_steps the profiler discarded
    warmup_steps: int = 0
    seconds: float = 0.0  # the profiled steps' wall time
    time_kind: str = ""  # what an operator's seconds are: "self CPU time" or "self device time"
    peak_flops: float | None = None  # the roof the operators were placed under
    peak_bandwidth: float | None = None
    roof_source: str | None = None
    roof_reason: str | None = None  # why there is no roof (bound unknown), where there is none
    launch_factor: float | None = None  # time over bound beyond which an operator is overhead
    cost_model_reason: str | None = None  # why predicted_s is empty, where it is
    breakdown: StepBreakdown = field(default_factory=StepBreakdown)
    top_lost: list[ProfileOp] = field(default_factory=list)  # most time lost first
    # per operator class, in OP_CLASSES order (empty: profiled before it was kept)
    classes: list[OpClassTime] = field(default_factory=list)
    # what one profiled step is where it is not the run's step (a generation); "" for a run's
    unit: str = ""
