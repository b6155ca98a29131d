"""FLOPs and MFU: model FLOPs from the problem's formulas, executed FLOPs counted by PyTorch.

Model FLOPs are analytic (see each problem); executed FLOPs are counted once per configuration
with ``torch.utils.flop_counter.FlopCounterMode`` over one real step. The counter knows matmuls,
convolutions and attention (backward included) but not causal masks or recompute, so the two can
differ by design: causal attention kernels count half their square as model FLOPs. MFU divides
model FLOP/s by the device's dense datasheet peak for the precision (flowrate.measure.peaks);
HFU does the same with executed FLOP/s. Where the peak is unknown both are empty with the reason.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch.utils.flop_counter import FlopCounterMode

from flowrate.measure.peaks import PeakLookup
from flowrate.problems.base import Batch

# Model FLOPs may exceed executed FLOPs by this much before flowrate warns that the analytic
# formula overclaims (which would inflate MFU).
OVERCLAIM_MARGIN = 0.01


def count_step_flops(step: Callable[[Batch], torch.Tensor], batch: Batch, device: torch.device) -> int:
    """FLOPs PyTorch executes in one call of ``step`` (which really runs: it is a step)."""
    with _countable_attention(device), FlopCounterMode(display=False) as counter:
        step(batch)
    return int(counter.get_total_flops())


@contextlib.contextmanager
def _countable_attention(device: torch.device) -> Iterator[None]:
    # The counter has no formula for the CPU's fused SDPA kernel (it would count 0), so count the
    # CPU step through the math backend; CUDA's flash and efficient kernels are counted as they are.
    if device.type != "cpu":
        yield
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        yield


@dataclass(frozen=True)
class FlopsReport:
    model_flops_per_sample: int
    executed_flops_per_sample: float | None  # None: not counted
    model_flops_per_sec: float
    hardware_flops_per_sec: float | None  # executed FLOPs per sample x samples/s
    peak_flops: float | None  # dense datasheet peak for the device and precision
    peak_source: str | None
    mfu: float | None  # model FLOP/s / peak
    hfu: float | None  # hardware FLOP/s / peak
    reason: str | None  # why mfu is empty
    measured_peak_flops: float | None = None  # a large GEMM through the same library, when run
    mfu_of_measured_peak: float | None = None
    bytes_per_sample: int | None = None  # memory-bound kernels
    bytes_per_sec: float | None = None
    peak_bandwidth: float | None = None  # bytes/s of the link the kernel uses
    bandwidth_fraction: float | None = None


def flops_report(
    *,
    peak: PeakLookup,
    samples_per_sec: float,
    model_flops_per_sample: int,
    executed_flops_per_sample: float | None,
    bytes_per_sample: int | None = None,
    bandwidth_kind: str = "memory",
    measured_peak_flops: float | None = None,
) -> FlopsReport:
    """Every FLOP/s and bandwidth figure of a run, with MFU against the datasheet ``peak``."""
    model_rate = samples_per_sec * model_flops_per_sample
    hardware_rate = samples_per_sec * executed_flops_per_sample if executed_flops_per_sample else None
    mfu = hfu = None
    reason = peak.reason
    if model_flops_per_sample == 0:
        reason = "the problem declares no FLOPs (a memory-bound kernel: see its bandwidth)"
    elif peak.flops:
        mfu = model_rate / peak.flops
        hfu = hardware_rate / peak.flops if hardware_rate is not None else None
    bytes_rate = samples_per_sec * bytes_per_sample if bytes_per_sample else None
    link = peak.host_link_bandwidth if bandwidth_kind == "host_link" else peak.memory_bandwidth
    return FlopsReport(
        model_flops_per_sample=model_flops_per_sample,
        executed_flops_per_sample=executed_flops_per_sample,
        model_flops_per_sec=model_rate,
        hardware_flops_per_sec=hardware_rate,
        peak_flops=peak.flops,
        peak_source=peak.entry.source if peak.entry else None,
        mfu=mfu,
        hfu=hfu,
        reason=None if mfu is not None else reason,
        measured_peak_flops=measured_peak_flops,
        mfu_of_measured_peak=(
            model_rate / measured_peak_flops if measured_peak_flops and model_flops_per_sample else None
        ),
        bytes_per_sample=bytes_per_sample,
        bytes_per_sec=bytes_rate,
        peak_bandwidth=link,
        bandwidth_fraction=bytes_rate / link if bytes_rate is not None and link else None,
    )


def flops_warnings(model_flops_per_sample: int, executed_flops_per_sample: float | None) -> list[str]:
    if executed_flops_per_sample is None or model_flops_per_sample == 0:
        return []
    if executed_flops_per_sample == 0:
        return [
            "PyTorch's FLOP counter saw no FLOPs in a step (custom kernels?): hardware FLOP/s is "
            "unavailable; MFU rests on the problem's analytic FLOPs alone"
        ]
    excess = model_flops_per_sample / executed_flops_per_sample - 1
    if excess > OVERCLAIM_MARGIN:
        return [
            f"the problem's model FLOPs exceed the FLOPs PyTorch executed by {excess:.0%}: check its "
            "forward_flops_per_sample() (MFU would be inflated)"
        ]
    return []
