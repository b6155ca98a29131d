"""--profile's operator table: each operator placed under a fixed roof, exactly, and the breakdown."""

from __future__ import annotations

import csv
import io

import pytest

from flowrate.harness.profile_table import (
    BETWEEN_OPERATORS,
    Timed,
    breakdown,
    most_lost,
    operator_rows,
    profiler_name,
)
from flowrate.harness.profiling import table_csv
from flowrate.measure.op_counter import OpCount, OpTally
from flowrate.measure.roofline import LAUNCH_FACTOR, Placement, Roof, place

# 1 TFLOP/s and 100 GB/s: the ridge is at 10 FLOPs per byte
ROOF = Roof(peak_flops=1e12, peak_bandwidth=1e11, source="a fixed roof")


def test_the_ridge_point_is_peak_flops_over_peak_bandwidth() -> None:
    assert ROOF.ridge == 10.0


def test_a_gemm_above_the_ridge_is_compute_bound_and_loses_its_time_over_the_flops_bound() -> None:
    # 1e9 FLOPs over 1e7 bytes: 100 FLOP/B; bound = max(1 ms, 0.1 ms) = 1 ms; measured 3 ms
    assert place(1e9, 1e7, 3e-3, ROOF) == Placement("compute", 1e-3, pytest.approx(2e-3))


def test_a_layernorm_below_the_ridge_is_memory_bound() -> None:
    # 1e6 FLOPs over 1e8 bytes: 0.01 FLOP/B; bound = max(1 µs, 1 ms) = 1 ms; measured 1.5 ms
    assert place(1e6, 1e8, 1.5e-3, ROOF) == Placement("memory", 1e-3, pytest.approx(0.5e-3))


def test_at_the_ridge_an_operator_is_memory_bound() -> None:
    assert place(1e9, 1e8, 1e-2, ROOF).bound == "memory"


def test_far_above_both_bounds_an_operator_is_overhead() -> None:
    # bound 1 ms: up to LAUNCH_FACTOR times it is still the bound's; beyond it, overhead
    assert place(1e9, 1e7, LAUNCH_FACTOR * 1e-3, ROOF).bound == "compute"
    assert place(1e9, 1e7, LAUNCH_FACTOR * 1e-3 * 1.01, ROOF) == Placement(
        "overhead", 1e-3, pytest.approx(LAUNCH_FACTOR * 1.01e-3 - 1e-3)
    )


def test_no_priced_work_is_overhead_with_all_its_time_lost_roof_or_not() -> None:
    assert place(0, 0, 2e-6, ROOF) == Placement("overhead", 0.0, 2e-6)
    assert place(0, 0, 2e-6, None) == Placement("overhead", 0.0, 2e-6)


def test_without_a_roof_the_bound_is_unknown_rather_than_guessed() -> None:
    assert place(1e9, 1e7, 3e-3, None) == Placement("unknown", None, None)


def test_profiler_names_join_the_counters_and_the_cost_models() -> None:
    assert profiler_name("aten.mm") == "aten::mm"
    assert profiler_name("aten.native_layer_norm.default") == "aten::native_layer_norm"


def _tally() -> OpTally:
    # the counter over the profiled steps: mm in two dtype rows, layer norm's bytes only
    ops = (
        OpCount("aten.mm", ("float32", "float32"), 6 * 10**8, 4 * 10**6, 2),
        OpCount("aten.mm", ("bfloat16", "bfloat16"), 4 * 10**8, 6 * 10**6, 1),
        OpCount("aten.native_layer_norm", ("float32",), 0, 10**8, 3),
    )
    return OpTally(ops, {}, 0, 0, 0)


TIMED = [
    Timed("aten::mm", 3, 3e-3),
    Timed("aten::native_layer_norm", 3, 1.5e-3),
    Timed("aten::view", 12, 1e-4),
    Timed(BETWEEN_OPERATORS, 3, 4e-4),
]


def test_each_row_joins_its_time_with_the_counters_flops_and_bytes_under_the_roof() -> None:
    rows = {row.op: row for row in operator_rows(TIMED, _tally(), ROOF, {"aten::mm": 1.2e-3})}
    mm = rows["aten::mm"]
    # both dtype rows of aten.mm: 1e9 FLOPs, 1e7 bytes over 3 calls in 3 ms
    assert (mm.calls, mm.seconds, mm.flops, mm.bytes) == (3, 3e-3, 10**9, 10**7)
    assert mm.flops_per_sec == pytest.approx(1e9 / 3e-3)
    assert mm.bytes_per_sec == pytest.approx(1e7 / 3e-3)
    assert (mm.bound, mm.bound_s, mm.lost_s, mm.predicted_s) == ("compute", 1e-3, pytest.approx(2e-3), 1.2e-3)
    norm = rows["aten::native_layer_norm"]
    assert (norm.bound, norm.bound_s, norm.lost_s, norm.predicted_s) == (
        "memory",
        1e-3,
        pytest.approx(0.5e-3),
        None,
    )
    view = rows["aten::view"]
    assert (view.flops, view.bytes, view.bound, view.lost_s) == (0, 0, "overhead", 1e-4)
    assert rows[BETWEEN_OPERATORS].bound == "overhead"
    assert [row.op for row in operator_rows(TIMED, _tally(), ROOF, None)] == [
        "aten::mm",
        "aten::native_layer_norm",
        BETWEEN_OPERATORS,
        "aten::view",
    ]  # most time first


def test_the_operators_losing_most_time_come_first() -> None:
    rows = operator_rows(TIMED, _tally(), ROOF, None)
    assert [(row.op, row.lost_s) for row in most_lost(rows, top=3)] == [
        ("aten::mm", pytest.approx(2e-3)),
        ("aten::native_layer_norm", pytest.approx(0.5e-3)),
        (BETWEEN_OPERATORS, 4e-4),
    ]


def test_without_a_roof_no_operator_loses_a_known_time() -> None:
    rows = operator_rows(TIMED, _tally(), None, None)
    assert {row.op: row.bound for row in rows} == {
        "aten::mm": "unknown",
        "aten::native_layer_norm": "unknown",
        "aten::view": "overhead",
        BETWEEN_OPERATORS: "overhead",
    }
    assert all(row.lost_s is None and row.bound_s is None for row in rows)
    assert most_lost(rows) == []


def test_the_breakdown_sums_the_rows_by_bound() -> None:
    rows = operator_rows([*TIMED, Timed("c10d::allreduce_", 1, 2e-3)], _tally(), ROOF, None)
    split = breakdown(rows, roofed=True, device_type="cpu", synthetic=True)
    assert split.compute_s == 3e-3
    assert split.memory_s == 1.5e-3
    assert split.overhead_s == pytest.approx(1e-4 + 4e-4)
    assert split.communication_s == 2e-3  # a collective, whatever its bound
    assert split.input_wait_s == 0.0
    assert (split.idle_s, split.host_to_device_s) == (None, None)
    assert split.notes["idle_s"] == "not measurable on a CPU: the host runs the operators itself"


def test_without_a_roof_the_breakdown_says_what_it_cannot_split() -> None:
    split = breakdown(
        operator_rows(TIMED, _tally(), None, None), roofed=False, device_type="cpu", synthetic=False
    )
    assert split.compute_s == 3e-3  # the operators that carry FLOPs
    assert (split.memory_s, split.overhead_s, split.input_wait_s) == (None, None, None)
    assert (
        split.notes["memory_s"] == "no peak: bound unknown, so memory-bound work cannot be told from overhead"
    )


def test_the_csv_holds_one_row_per_operator_with_the_tables_columns() -> None:
    rows = operator_rows(TIMED, _tally(), ROOF, None)
    read = list(csv.DictReader(io.StringIO(table_csv(rows))))
    assert [r["op"] for r in read] == [row.op for row in rows]
    assert read[0]["flops"] == "1000000000" and read[0]["bound"] == "compute"
    assert read[0]["predicted_s"] == ""  # not priced: empty, not "None"
