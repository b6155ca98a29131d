"""FLOPs and MFU: model FLOPs from the problem's formulas, executed FLOPs counted per operator.

Model FLOPs are analytic (see each problem); executed FLOPs are counted once per configuration
over one real step by flowrate.measure.op_counter, at the dispatcher: matmuls, convolutions and
every attention kernel (the CPU's fused flash kernel and CUDA's flash, efficient and cuDNN ones,
backward included, causal masks counted over the pairs they keep). The two are compared: beyond
AGREEMENT_MARGIN either way, outside the known reasons (attention masks, attention backward's
recomputation of Q·Kᵀ, --recompute), the run warns and names the op class or ops that differ.
MFU divides model FLOP/s by the device's dense datasheet peak for the precision
(flowrate.measure.peaks); HFU does the same with executed FLOP/s. Where the peak is unknown both
are empty with the reason; a figure above 100% is withheld with the reason, never shown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from flowrate.measure.op_counter import OpTally, count_ops, op_class
from flowrate.measure.peaks import PeakLookup
from flowrate.problems.base import Batch
from flowrate.units import si

# Model and executed FLOPs may differ by this share (either way) before flowrate warns: a model
# formula above the count inflates MFU, one below it hides work.
AGREEMENT_MARGIN = 0.02


def count_step(step: Callable[[Batch], torch.Tensor], batch: Batch) -> OpTally:
    """What one call of ``step`` executes, op by op (the step really runs)."""
    return count_ops(lambda: step(batch))[1]


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
        if mfu > 1:  # no device runs above its dense peak: a formula or the table is wrong
            reason, mfu = withheld_reason(mfu, peak.flops), None
        if hfu is not None and hfu > 1:
            hfu = None
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


def interval_mfu(model_flops_per_sec: float, peak_flops: float | None) -> float | None:
    """An interval's MFU; None without a peak, or above 100% (the run's MFU says why)."""
    if not peak_flops or model_flops_per_sec > peak_flops:
        return None
    return model_flops_per_sec / peak_flops


def withheld_reason(fraction: float, peak_flops: float) -> str:
    return (
        f"MFU withheld: model FLOP/s would be {fraction:.0%} of the {si(peak_flops, 'FLOP/s')} "
        "dense peak, which no device reaches: the problem's FLOPs or the peak table are wrong"
    )


def flops_warnings(
    model_flops_per_sample: int,
    executed_flops_per_sample: float | None,
    tally: OpTally | None = None,
    *,
    batch_size: int = 1,
    recompute_allowance: float = 0.0,
    model_flops_by_class: dict[str, int] | None = None,
) -> list[str]:
    """A warning when the model and executed FLOPs per sample disagree beyond AGREEMENT_MARGIN.

    ``tally`` is the counted step (``batch_size`` samples). Masks and attention backward's
    recomputation are known reasons: the count also agrees when the model formula counts
    attention over every (query, key) pair or over the pairs the masks keep, without the
    recomputation. ``recompute_allowance``
    (FLOPs per sample) is the most that --recompute may add. Per op class where the problem gives
    ``model_flops_by_class``, else the largest counted ops, the warning names what differs.
    """
    if executed_flops_per_sample is None or model_flops_per_sample == 0:
        return []
    if executed_flops_per_sample == 0:
        return [
            "the FLOP counter saw no FLOPs in a step (custom kernels?): hardware FLOP/s is "
            "unavailable; MFU rests on the problem's analytic FLOPs alone"
        ]
    model, executed = model_flops_per_sample, executed_flops_per_sample
    readings = _readings(executed, tally, batch_size)
    low, high = 1 - AGREEMENT_MARGIN, 1 + AGREEMENT_MARGIN
    if any((c - recompute_allowance) * low <= model <= c * high for c in readings):
        return []
    nearest = min(readings, key=lambda c: abs(model / c - 1))
    gap = model / nearest - 1
    effect = "MFU would be inflated" if gap > 0 else "MFU understates the work done"
    return [
        f"the problem's model FLOPs ({si(model, 'FLOP')}/sample) are {abs(gap):.1%} "
        f"{'above' if gap > 0 else 'below'} the {si(nearest, 'FLOP')}/sample counted "
        f"({readings[nearest]}): {effect}; {_what_differs(tally, batch_size, model_flops_by_class)}"
    ]


def _readings(executed: float, tally: OpTally | None, batch_size: int) -> dict[float, str]:
    """The counted FLOPs per sample a model formula may match, each with how it was reached:
    as executed, or with attention over every pair or over the pairs the masks keep (both
    without backward's recomputation of Q·Kᵀ)."""
    readings = {executed: "as executed"}
    attention = tally.flops_by_class().get("attention", 0) if tally else 0
    if tally and attention:
        other = executed - attention / batch_size
        readings.setdefault(
            other + tally.attention_full_flops / batch_size, "attention over every (query, key) pair"
        )
        readings.setdefault(
            other + tally.attention_kept_flops / batch_size, "attention over the pairs the masks keep"
        )
    return readings


def _what_differs(tally: OpTally | None, batch_size: int, model_by_class: dict[str, int] | None) -> str:
    """The op class whose model and counted FLOPs differ most, or else the largest counted ops."""
    if tally is None:
        return "check the problem's forward_flops_per_sample()"
    counted = {name: flops / batch_size for name, flops in tally.flops_by_class().items()}
    if model_by_class:
        worst = max(
            set(counted) | set(model_by_class),
            key=lambda c: abs(model_by_class.get(c, 0) - counted.get(c, 0)),
        )
        return (
            f"{worst} differs most (model {si(model_by_class.get(worst, 0), 'FLOP')}/sample, "
            f"counted {si(counted.get(worst, 0), 'FLOP')}/sample)"
        )
    by_op = tally.flops_by_op()
    total = sum(by_op.values()) or 1
    largest = ", ".join(f"{op} ({op_class(op)}) {by_op[op] / total:.0%}" for op in tally.counted_ops[:3])
    return f"largest counted ops: {largest}; check the problem's forward_flops_per_sample()"
