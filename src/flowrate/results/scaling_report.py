"""What a weak-scaling campaign (flowrate.campaigns.scaling.run) reports: one point per process
count, with its efficiency, and the communication that explains the shortfall. A record of the
results layer, so that what draws or prints it (analysis, cli) needs nothing of the campaign."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class ScalingPoint:
    """One size: its process count, total and per-rank throughput, and the efficiency."""

    processes: int
    samples_per_sec: float  # sum over ranks
    samples_per_sec_per_rank: float
    efficiency: float  # against the smallest size, per rank
    ideal_samples_per_sec: float  # linear scaling from the baseline
    run_id: str


@dataclass(frozen=True)
class CommOverhead:
    """One size's predicted all-reduce overhead per step against its measured step overhead
    (flowrate.campaigns.scaling.comm)."""

    processes: int
    gradient_bytes: int
    busbw_bytes_per_sec: float
    predicted_s: float  # per step: the gradients' all-reduce at the measured busbw
    measured_s: float  # per step: step time at this size minus the baseline's


@dataclass(frozen=True)
class ScalingReport:
    name: str
    baseline_processes: int
    threads_per_rank: int | None
    points: list[ScalingPoint]
    communication: list[CommOverhead] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
