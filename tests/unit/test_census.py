"""The precision census: formats, accumulate dtypes, effective precision and the mixed peak."""

from __future__ import annotations

import pytest
import torch

from flowrate.measure.census import (
    annotated_ops,
    census,
    census_line,
    mixed_mfu_fields,
    mixed_peak,
    op_format,
)
from flowrate.measure.op_counter import OpCount, OpTally, count_ops
from flowrate.measure.peaks import DevicePeak, peak_for, registered_peaks
from flowrate.results.codec import decode
from flowrate.results.sections import Census


def _hand_built_step(a: torch.Tensor, w: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """An fp32 matmul, a bf16 matmul under autocast and an fp32 softmax, on known shapes."""
    with torch.inference_mode():
        y = torch.mm(a, w)  # fp32: 2·4·8·16 FLOPs
        with torch.autocast("cpu", dtype=torch.bfloat16):
            torch.mm(y, v)  # autocast casts y and v to bf16, then a bf16 mm: 2·4·16·2 FLOPs
        return torch.softmax(y, -1)  # fp32, no FLOPs in torch's registry: its bytes only


def test_census_of_a_hand_built_step_equals_hand_counts() -> None:
    a, w, v = torch.ones(4, 8), torch.ones(8, 16), torch.ones(16, 2)
    _, tally = count_ops(lambda: _hand_built_step(a, w, v))
    rows = {(r["op"], tuple(r["dtypes"])): r for r in annotated_ops(tally)}
    f32, b16 = "float32", "bfloat16"
    # bytes: each input read once, each output written once, at its element size
    assert rows[("aten.mm", (f32, f32))] == {
        "op": "aten.mm", "dtypes": [f32, f32], "format": "fp32", "accumulate": "fp32",
        "flops": 2 * 4 * 8 * 16, "bytes": (4 * 8 + 8 * 16 + 4 * 16) * 4, "calls": 1,
    }  # fmt: skip
    assert rows[("aten.mm", (b16, b16))] == {
        "op": "aten.mm", "dtypes": [b16, b16], "format": "bf16", "accumulate": "fp32",
        "flops": 2 * 4 * 16 * 2, "bytes": (4 * 16 + 16 * 2 + 4 * 2) * 2, "calls": 1,
    }  # fmt: skip
    # autocast's two casts read fp32 and write bf16
    assert rows[("aten._to_copy", (f32,))]["bytes"] == 4 * 16 * (4 + 2) + 16 * 2 * (4 + 2)
    assert rows[("aten._softmax", (f32,))] == {
        "op": "aten._softmax", "dtypes": [f32], "format": "fp32", "accumulate": None,
        "flops": 0, "bytes": 2 * 4 * 16 * 4, "calls": 1,
    }  # fmt: skip
    c = census(tally, "bf16").to_dict()
    assert c == {
        "requested": "bf16",
        "effective": "bf16",  # the fp32 softmax carries no FLOPs: it does not decide
        "tf32": False,
        "op_calls": 5,
        "formats": {
            "bf16": {"flops": 256, "bytes": 208, "calls": 1, "flop_share": 0.2},
            "fp32": {"flops": 1024, "bytes": 896 + 576 + 512, "calls": 4, "flop_share": 0.8},
        },
    }
    assert (
        census_line(decode(Census, c))
        == "bf16 requested — 80.0% of FLOPs in fp32, 20.0% in bf16; effective: bf16"
    )


def _tally(*ops: OpCount) -> OpTally:
    return OpTally(ops, {}, 0, 0, 0)


def test_format_rules() -> None:
    mm32 = OpCount("aten.mm", ("float32", "float32"), 100, 10, 1)
    assert op_format(mm32) == "fp32"
    assert op_format(mm32, tf32=True) == "tf32"  # CUDA with precision tf32
    add32 = OpCount("aten.add", ("float32", "float32"), 0, 10, 1)
    assert op_format(add32, tf32=True) == "fp32"  # TF32 is a matmul setting
    # the lowest floating input decides; int64 indices do not
    assert op_format(OpCount("aten.embedding", ("float32", "int64"), 0, 8, 1)) == "fp32"
    assert op_format(OpCount("aten.index", ("int64", "bool"), 0, 8, 1)) is None
    assert op_format(OpCount("aten._int_mm", ("int8", "int8"), 64, 8, 1)) == "int8"
    assert (
        op_format(OpCount("aten._weight_int8pack_mm", ("bfloat16", "int8", "bfloat16"), 64, 8, 1)) == "bf16"
    )
    assert op_format(OpCount("aten.where", ("bool", "float16", "float32"), 0, 8, 1)) == "fp16"


def test_effective_is_the_lowest_format_carrying_flops() -> None:
    fp32_only = _tally(OpCount("aten.mm", ("float32", "float32"), 100, 10, 2))
    assert census(fp32_only, "fp32").effective == "fp32"
    as_tf32 = census(fp32_only, "tf32", tf32=True)
    assert as_tf32.effective == "tf32" and as_tf32.to_dict()["formats"]["tf32"]["calls"] == 2
    # a 1-FLOP bf16 op infects the run; a bf16 cast with no FLOPs does not
    mixed = _tally(
        OpCount("aten.mm", ("float32", "float32"), 1000, 10, 1),
        OpCount("aten.bmm", ("bfloat16", "bfloat16"), 1, 10, 1),
    )
    assert census(mixed, "fp32").effective == "bf16"
    cast = _tally(
        OpCount("aten.mm", ("float32", "float32"), 1000, 10, 1),
        OpCount("aten._to_copy", ("bfloat16",), 0, 10, 1),
    )
    assert census(cast, "fp32").effective == "fp32"
    tie = _tally(
        OpCount("aten.mm", ("float16", "float16"), 10, 1, 1),
        OpCount("aten.mm", ("bfloat16", "bfloat16"), 10, 1, 1),
    )
    assert census(tie, "bf16").effective == "bf16+fp16"
    none = census(_tally(OpCount("aten.copy_", ("float32", "float32"), 0, 8, 1)), "fp32")
    assert none.effective is None
    assert census_line(decode(Census, none.to_dict())) == "fp32 requested — no op carried FLOPs; effective: —"


_DEVICE = DevicePeak(
    name="Test X1",
    match=("testx1",),
    dense_flops={"fp32": 10e12, "bf16": 100e12},
    memory_bandwidth=1e12,
    host_link_bandwidth=None,
    source="test",
)


def test_mixed_peak_is_time_weighted() -> None:
    with registered_peaks(_DEVICE):
        peak = peak_for("testx1", "bf16")
        # 90 TFLOP of bf16 at 100 TFLOP/s (0.9 s) and 10 TFLOP of fp32 at 10 TFLOP/s (1 s)
        mixed = mixed_peak(peak, {"bf16": 90 * 10**12, "fp32": 10 * 10**12, "none": 0})
        assert mixed.flops == pytest.approx(100e12 / 1.9, rel=1e-12) and mixed.reason is None
        tally = _tally(
            OpCount("aten.mm", ("bfloat16", "bfloat16"), 90, 1, 1),
            OpCount("aten.mm", ("float32", "float32"), 10, 1, 1),
        )
        fields = mixed_mfu_fields(peak, census(tally, "bf16"), 100e12 / 1.9 / 2)
        assert fields["mixed_mfu"] == pytest.approx(0.5, rel=1e-12) and fields["mixed_mfu_reason"] is None
        over = mixed_mfu_fields(peak, census(tally, "bf16"), 100e12)
        assert over["mixed_mfu"] is None and over["mixed_mfu_reason"].startswith("mixed MFU withheld: 190%")
        fp16 = mixed_peak(peak, {"fp16": 5, "bf16": 5})
        assert (
            fp16.flops is None and fp16.reason == "Test X1 has no fp16 peak in the table (fp16 carried FLOPs)"
        )
        int8 = mixed_peak(peak, {"int8": 5})
        assert int8.flops is None and "no int8 peak" in str(int8.reason)
    unknown = mixed_peak(peak_for("no such device", "fp32"), {"fp32": 1})
    assert unknown.flops is None and "no datasheet peak for 'no such device'" in str(unknown.reason)


@pytest.mark.parametrize(("precision", "effective"), [("fp32", "fp32"), ("bf16", "bf16")])
def test_effective_precision_end_to_end(run_cli, precision: str, effective: str) -> None:  # type: ignore[no-untyped-def]
    out = run_cli(
        "run", "-p", "transformer", "--size", "debug", "--precision", precision,
        "--steps", "2", "--sample-every", "1", "--batch-size", "2", "--preheat", "1", "--json",
    )  # fmt: skip
    assert out.code == 0, out.stderr
    data = out.json()
    c = data["operators"]["census"]
    assert (c["requested"], c["effective"]) == (precision, effective)
    assert sum(f["flops"] for f in c["formats"].values()) == data["operators"]["flops"]
    assert sum(f["calls"] for f in c["formats"].values()) == c["op_calls"] > 0
    assert all("format" in row and "accumulate" in row for row in data["operators"]["ops"])
    # the CPU has no datasheet peak: the mixed MFU is empty, with the reason
    assert data["flops"]["mixed_mfu"] is None and "no datasheet peak" in data["flops"]["mixed_mfu_reason"]


def test_a_quantized_run_whose_format_carried_no_flops_says_why() -> None:
    # torchao's int8 weight-only linear on a CPU: an int8 copy (no FLOPs), then an fp32 aten.mm
    dequantized = _tally(
        OpCount("aten._to_copy", ("int8",), 0, 8, 1),
        OpCount("aten.mm", ("float32", "float32"), 100, 10, 1),
    )
    recorded = decode(Census, census(dequantized, "int8-weights").to_dict())
    assert census_line(recorded, "cpu") == (
        "int8-weights requested — 100.0% of FLOPs in fp32; effective: fp32 (weight-only int8: torchao "
        "dequantizes the weights to fp32 and multiplies in fp32 on the CPU; the int8 saves memory, "
        "not arithmetic)"
    )
    assert census_line(decode(Census, census(dequantized, "int8-dynamic").to_dict())) == (
        "int8-dynamic requested — 100.0% of FLOPs in fp32; effective: fp32 (no FLOPs in int8: "
        "torchao's matmuls ran in fp32)"
    )
    # the int8 GEMM carried FLOPs: nothing to explain; nor for a precision that is not quantized
    integer = _tally(OpCount("aten._int_mm", ("int8", "int8"), 100, 10, 1))
    line = census_line(decode(Census, census(integer, "int8-dynamic").to_dict()), "cpu")
    assert line == "int8-dynamic requested — 100.0% of FLOPs in int8; effective: int8"
    plain = decode(Census, census(dequantized, "fp32").to_dict())
    assert census_line(plain, "cpu") == "fp32 requested — 100.0% of FLOPs in fp32; effective: fp32"
