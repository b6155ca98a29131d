"""The cost model checked operator by operator: the classes both sides are summed by, the cost
model's time per op, the profile's time per class, and `estimate --check`'s per-operator view."""

from __future__ import annotations

import dataclasses

import pytest

from estimate_factories import OVERHEADS, TinyMLP, flat_device
from flowrate.analysis.estimate_check import operator_check
from flowrate.choices import OptimizerName
from flowrate.cli.op_check_text import check_json, check_table
from flowrate.config import Mode, Precision
from flowrate.estimate.cost import estimate_step, op_seconds
from flowrate.estimate.ops import OP_CLASSES, op_class
from flowrate.estimate.trace import trace_step
from flowrate.harness.profile_table import BETWEEN_OPERATORS, class_times
from flowrate.problems.registry import get_problem
from flowrate.results.profile import OpClassTime, Profile, ProfileOp


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("aten::mm", "matmul"),
        ("aten.addmm.default", "matmul"),
        ("aten::convolution_backward", "conv"),
        ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention"),
        ("aten::embedding", "embedding"),
        ("aten::index_select", "embedding"),
        ("aten::_to_copy", "copy"),
        ("aten::native_layer_norm", "elementwise"),
        ("aten::gelu", "elementwise"),
        ("aten::_fused_adamw_", "optimizer"),
        ("aten::t", "view"),
        ("aten.empty.memory_format", "view"),
        # composites decompose into the kernels above before any runs: their own time is a wrapper's
        ("aten::linear", "framework"),
        ("aten::layer_norm", "framework"),
        ("Optimizer.step#AdamW.step", "framework"),
        (BETWEEN_OPERATORS, "framework"),
    ],
)
def test_an_op_and_its_profiler_event_are_of_one_class(name: str, expected: str) -> None:
    assert op_class(name) == expected


def test_the_classes_follow_what_prices_each_op_of_a_traced_step() -> None:
    problem = get_problem("transformer", "debug", {"layers": 1})
    trace = trace_step(
        problem, mode=Mode.TRAIN, precision=Precision.FP32, optimizer=OptimizerName.ADAMW, batch_size=2
    )
    seen = set()
    for op in trace.ops:
        kind = op.kind.removesuffix("_backward")
        if not op.dispatch:  # never dispatched in a real run
            expected: tuple[str, ...] = ("framework",)
        elif not op.kernel:
            expected = ("view",)
        elif kind in ("matmul", "attention", "optimizer"):
            expected = (kind,)
        elif op.dispatch == "copy":
            expected = ("copy", "embedding")
        else:
            expected = ("elementwise",)
        assert op_class(op.name) in expected, (op.name, op.kind, op.dispatch)
        seen.add(op_class(op.name))
    assert seen == set(OP_CLASSES) - {"conv"}


@pytest.mark.parametrize("device_type", ["cpu", "cuda"])
@pytest.mark.parametrize("overheads", [None, OVERHEADS])
def test_the_ops_seconds_and_the_framework_terms_are_the_cost_models_step(device_type, overheads) -> None:  # type: ignore[no-untyped-def]
    device = dataclasses.replace(flat_device(device_type=device_type), overheads=overheads)
    trace = trace_step(
        TinyMLP(), mode=Mode.TRAIN, precision=Precision.FP32, optimizer=OptimizerName.ADAMW, batch_size=2
    )
    per_op, framework = op_seconds(trace, device)
    assert len(per_op) == len(trace.ops)
    assert sum(per_op) + framework == pytest.approx(estimate_step(trace, device).step_s, rel=1e-12)
    assert (framework > 0) == (overheads is not None)  # autograd, modules, optimizer, step


def _row(op: str, calls: int, seconds: float) -> ProfileOp:
    return ProfileOp(op, calls, seconds, 0, 0, None, None, "overhead", None, None)


ROWS = [
    _row("aten::mm", 6, 0.5),
    _row("aten::addmm", 3, 0.25),
    _row("aten::native_layer_norm", 6, 0.25),
    _row("aten::t", 9, 0.125),
    _row(BETWEEN_OPERATORS, 3, 0.0625),
    _row("Optimizer.step#AdamW.step", 3, 0.0625),
]


def test_the_table_is_summed_by_class_beside_the_cost_models_time_in_the_same_classes() -> None:
    predicted = {"matmul": 0.375, "copy": 0.125, "elementwise": 0.5, "framework": 0.0}
    assert class_times(ROWS, predicted) == [
        OpClassTime("matmul", calls=9, measured_s=0.75, predicted_s=0.375),
        OpClassTime("copy", calls=0, measured_s=0.0, predicted_s=0.125),  # predicted, none measured
        OpClassTime("elementwise", calls=6, measured_s=0.25, predicted_s=0.5),
        OpClassTime("view", calls=9, measured_s=0.125, predicted_s=0.0),  # measured, none predicted
        OpClassTime("framework", calls=6, measured_s=0.125, predicted_s=0.0),
    ]
    unpriced = class_times(ROWS, None)
    assert [c.op_class for c in unpriced] == ["matmul", "elementwise", "view", "framework"]
    assert all(c.predicted_s is None for c in unpriced)


# over two profiled steps
PROFILE = Profile(
    steps=2,
    classes=[
        OpClassTime("matmul", calls=8, measured_s=0.5, predicted_s=0.25),
        OpClassTime("elementwise", calls=4, measured_s=0.25, predicted_s=0.25),
        OpClassTime("optimizer", calls=0, measured_s=0.0, predicted_s=0.0625),
        OpClassTime("framework", calls=2, measured_s=0.125, predicted_s=0.0),
    ],
)


def test_the_per_operator_view_names_the_classes_it_mispriced_most_time_first() -> None:
    title, rows, line = check_table(operator_check("abcdef123456", PROFILE))
    assert title == "predicted against measured per operator class: run abcdef12"
    assert rows == [  # per profiled step
        ["matmul", "4", "125 ms", "250 ms", "0.50"],
        ["elementwise", "2", "125 ms", "125 ms", "1.00"],
        ["optimizer", "0", "31.2 ms", "0 s", "—"],
        ["framework", "1", "0 s", "62.5 ms", "0.00"],
    ]
    assert line == (
        "mispriced (outside ±30%), most time first: matmul (0.50x: predicted 125 ms, measured 250 ms); "
        "framework (0.00x: predicted 0 s, measured 62.5 ms); optimizer (predicted 31.2 ms, none measured)"
    )
    [data] = check_json([operator_check("abcdef123456", PROFILE)])
    assert data["mispriced"] == ["matmul", "framework", "optimizer"]
    assert data["classes"][0] == {
        "op_class": "matmul",
        "calls_per_step": 4.0,
        "predicted_s": 0.125,
        "measured_s": 0.25,
        "ratio": 0.5,
        "mispriced": True,
    }


def test_a_view_within_30_percent_everywhere_says_so() -> None:
    close = Profile(steps=1, classes=[OpClassTime("matmul", 1, measured_s=1.0, predicted_s=1.25)])
    assert check_table(operator_check("r", close))[2] == "every class within ±30% of its measured time"


def test_a_profile_the_cost_model_did_not_price_has_no_view_and_says_why() -> None:
    generated = dataclasses.replace(PROFILE, cost_model_reason="not a generation's prefill and decode")
    assert check_table(operator_check("r", generated))[1:] == (
        [],
        "no per-operator view: not a generation's prefill and decode",
    )
    older = Profile(steps=2)
    assert check_table(operator_check("r", older))[2] == (
        "no per-operator view: profiled before flowrate kept the time per class: profile it again"
    )
