"""The precision census of a counted step: which numeric formats carried its FLOPs and bytes.

From the per-operator tally (flowrate.measure.op_counter), each (op, input dtypes) row gets:

- a **format**: the lowest-precision floating dtype among its tensor inputs (bf16 and fp16
  keep their names, float32 is fp32, float64 fp64, float8 fp8). Integer and bool inputs are
  indices, masks and counts, not arithmetic, so they set no format, except int8/uint8 operands of
  an op that carries FLOPs (the integer GEMMs), which are int8. An op with no floating input and
  no FLOPs (an index gather of ints) has format None. A float32 matmul or convolution counts as
  tf32 when the run is on CUDA with precision tf32: flowrate turns TF32 on for exactly that
  policy and off for every other (flowrate.execution.precision.matmul_settings).
- an **accumulate** dtype where known: ops that carry FLOPs (matmuls, convolutions, attention)
  accumulate 16-bit, tf32 and fp32 products in fp32 (cuBLAS's and oneDNN's compute type for
  PyTorch's GEMMs; cuBLAS may still split a 16-bit reduction where torch allows reduced-precision
  reduction), fp8 in fp32, int8 in int32, fp64 in fp64. Other ops: not known (None).

The **effective precision** is the lowest format that carries any FLOPs (order int8 < fp8 <
fp16 = bf16 < tf32 < fp32 < fp64), beside the requested one: "the lowest precision you ever touch
infects your whole run". Ops without FLOPs (softmax, layer norm, the optimizer's elementwise
updates) do not decide it: their bytes are counted by format, their FLOPs are 0. A step that
carried no FLOPs has no effective precision.

The **mixed peak** weighs each format's datasheet peak by the time its FLOPs would take at that
peak: Σ flops_f / Σ (flops_f / peak_f). If every FLOP ran at its own format's peak the step would
take Σ flops_f / peak_f seconds, so this is the rate the whole step could reach; an arithmetic
mean of the peaks weighted by FLOPs would credit the fast format with time it never had.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from flowrate.measure.peaks import PRECISION_KEYS, PeakLookup
from flowrate.units import si

if TYPE_CHECKING:  # the text (census_line) is read without torch, as `flowrate show` does
    from flowrate.measure.op_counter import OpCount, OpTally

# Lowest first; formats on one rung are equally low.
RANK = {"int8": 0, "fp8": 1, "fp16": 2, "bf16": 2, "tf32": 3, "fp32": 4, "fp64": 5}
_FLOATS = {
    "float16": "fp16",
    "bfloat16": "bf16",
    "float32": "fp32",
    "float64": "fp64",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "float8_e4m3fnuz": "fp8",
    "float8_e5m2fnuz": "fp8",
}
_ACCUMULATE = {"int8": "int32", "fp64": "fp64"}  # every other format carrying FLOPs: fp32
_TF32_OPS = ("mm", "matmul", "linear", "conv", "baddbmm", "addbmm")


def op_format(op: OpCount, tf32: bool = False) -> str | None:
    """The format of one counted row (see the module's docstring for the rule)."""
    floats = [_FLOATS[d] for d in op.dtypes if d in _FLOATS]
    if floats:
        fmt = min(floats, key=RANK.__getitem__)
    elif op.flops and any(d in ("int8", "uint8") for d in op.dtypes):
        fmt = "int8"
    else:
        return None
    if fmt == "fp32" and tf32 and op.flops and any(word in op.op for word in _TF32_OPS):
        return "tf32"
    return fmt


def accumulate_dtype(op: OpCount, fmt: str | None) -> str | None:
    """What the op's products add up in, where known: only for ops that carry FLOPs."""
    if not op.flops or fmt is None:
        return None
    return _ACCUMULATE.get(fmt, "fp32")


@dataclass(frozen=True)
class FormatShare:
    flops: int
    bytes: int
    calls: int


@dataclass(frozen=True)
class Census:
    requested: str
    formats: dict[str, FormatShare]  # format (or "none": no floating input) -> its totals
    tf32: bool  # fp32 matmuls and convolutions were counted as tf32

    @property
    def total_flops(self) -> int:
        return sum(f.flops for f in self.formats.values())

    @property
    def op_calls(self) -> int:
        """Ops dispatched in the counted step: the launches (eager ops) a step makes."""
        return sum(f.calls for f in self.formats.values())

    @property
    def effective(self) -> str | None:
        """The lowest format carrying any FLOPs; formats on one rung are joined ("bf16+fp16")."""
        carrying = [fmt for fmt, share in self.formats.items() if share.flops and fmt in RANK]
        if not carrying:
            return None
        low = min(RANK[fmt] for fmt in carrying)
        return "+".join(sorted(fmt for fmt in carrying if RANK[fmt] == low))

    def flop_shares(self) -> dict[str, float]:
        """Each format's share of the FLOPs, largest first (formats with none left out)."""
        total = self.total_flops
        if not total:
            return {}
        shares = {fmt: f.flops / total for fmt, f in self.formats.items() if f.flops}
        return dict(sorted(shares.items(), key=lambda kv: (-kv[1], kv[0])))

    def to_dict(self) -> dict[str, Any]:
        shares = self.flop_shares()
        return {
            "requested": self.requested,
            "effective": self.effective,
            "tf32": self.tf32,
            "op_calls": self.op_calls,
            "formats": {
                fmt: {
                    "flops": f.flops,
                    "bytes": f.bytes,
                    "calls": f.calls,
                    "flop_share": shares.get(fmt, 0.0),
                }
                for fmt, f in self.formats.items()
            },
        }


def census(tally: OpTally, requested: str, tf32: bool = False) -> Census:
    """The census of one counted step; ``tf32``: fp32 matmuls ran as TF32 (CUDA, precision tf32)."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for op in tally.ops:
        entry = totals[op_format(op, tf32) or "none"]
        entry[0] += op.flops
        entry[1] += op.bytes
        entry[2] += op.calls
    formats = {fmt: FormatShare(*values) for fmt, values in sorted(totals.items())}
    return Census(requested, formats, tf32)


def annotated_ops(tally: OpTally, tf32: bool = False) -> list[dict[str, Any]]:
    """The operators table's rows with each row's format and accumulate dtype."""
    rows = []
    for op in tally.ops:
        fmt = op_format(op, tf32)
        rows.append(
            {
                "op": op.op,
                "dtypes": list(op.dtypes),
                "format": fmt,
                "accumulate": accumulate_dtype(op, fmt),
                "flops": op.flops,
                "bytes": op.bytes,
                "calls": op.calls,
            }
        )
    return rows


@dataclass(frozen=True)
class MixedPeak:
    flops: float | None  # Σ flops_f / Σ (flops_f / peak_f); None with the reason
    reason: str | None


def mixed_peak(peak: PeakLookup, flops_by_format: dict[str, int]) -> MixedPeak:
    """The time-weighted peak of the formats that carried FLOPs, or None naming a missing peak."""
    carrying = {fmt: n for fmt, n in flops_by_format.items() if n}
    if not carrying:
        return MixedPeak(None, "no op carried FLOPs")
    if peak.entry is None:
        return MixedPeak(None, peak.reason)
    seconds = 0.0
    for fmt, flops in carrying.items():
        figure = peak.entry.dense_flops.get(fmt) if fmt in PRECISION_KEYS else None
        if not figure:
            return MixedPeak(None, f"{peak.entry.name} has no {fmt} peak in the table ({fmt} carried FLOPs)")
        seconds += flops / figure
    return MixedPeak(sum(carrying.values()) / seconds, None)


def mixed_mfu_fields(peak: PeakLookup, run_census: Census, model_flops_per_sec: float) -> dict[str, Any]:
    """The flops section's mixed-peak fields: MFU against the peak of the format of each FLOP."""
    mixed = mixed_peak(peak, {fmt: f.flops for fmt, f in run_census.formats.items()})
    mfu, reason = None, mixed.reason
    if mixed.flops and model_flops_per_sec:
        mfu = model_flops_per_sec / mixed.flops
        if mfu > 1:
            reason, mfu = f"mixed MFU withheld: {mfu:.0%} of the {si(mixed.flops, 'FLOP/s')} mixed peak", None
    elif mixed.flops:
        reason = "the problem declares no FLOPs"
    return {"mixed_peak_flops": mixed.flops, "mixed_mfu": mfu, "mixed_mfu_reason": reason}


class RecordedFormat(Protocol):
    """One format's share of a recorded census (flowrate.results.sections.FormatFigures)."""

    @property
    def flops(self) -> int: ...

    @property
    def flop_share(self) -> float: ...


class RecordedCensus(Protocol):
    """A census as a result records it (flowrate.results.sections.Census)."""

    @property
    def requested(self) -> str | None: ...

    @property
    def effective(self) -> str | None: ...

    @property
    def formats(self) -> Mapping[str, RecordedFormat]: ...


# the format a quantized precision's matmuls would compute in, were they not dequantized
_QUANTIZED = {"int8-weights": "int8", "int8-dynamic": "int8", "fp8": "fp8"}


def census_line(c: RecordedCensus, device_type: str | None = None) -> str:
    """'bf16 requested — 97.8% of FLOPs in bf16, 2.2% in fp32; effective: bf16'. A quantized
    precision whose own format carried no FLOPs says why the effective one is wider: torchao's
    int8 weight-only layers dequantize the weights (an int8 copy, a scale) and multiply in the
    activations' dtype (aten.mm on a CPU)."""
    shares = sorted(
        ((fmt, f.flop_share) for fmt, f in c.formats.items() if f.flops),
        key=lambda kv: (-kv[1], kv[0]),
    )
    if not shares:
        return f"{c.requested} requested — no op carried FLOPs; effective: —"
    parts = [
        f"{share:.1%} of FLOPs in {fmt}" if n == 0 else f"{share:.1%} in {fmt}"
        for n, (fmt, share) in enumerate(shares)
    ]
    line = f"{c.requested} requested — {', '.join(parts)}; effective: {c.effective or '—'}"
    return line + _dequantized(c, device_type)


def _dequantized(c: RecordedCensus, device_type: str | None) -> str:
    """Why a quantized run's effective precision is not its format, or nothing."""
    low = _QUANTIZED.get(c.requested or "")
    if low is None or c.effective is None or low in c.effective.split("+"):
        return ""
    where = f" on the {device_type.upper()}" if device_type else ""
    if c.requested == "int8-weights":
        return (
            f" (weight-only int8: torchao dequantizes the weights to {c.effective} and multiplies "
            f"in {c.effective}{where}; the int8 saves memory, not arithmetic)"
        )
    return f" (no FLOPs in {low}: torchao's matmuls ran in {c.effective}{where})"


def launch_ceiling(op_calls: int, seconds_per_call: float) -> float | None:
    """Steps/s when a step's ``op_calls`` launches at ``seconds_per_call`` each are all it does."""
    if op_calls <= 0 or seconds_per_call <= 0:
        return None
    return 1 / (op_calls * seconds_per_call)
