"""benchmarks/side_by_side.py: two callables in flowrate's ABBA order, and B / A with its interval
from flowrate.results.verdict."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable

import pytest

from benchmark_scripts import BENCHMARKS, load_benchmark
from flowrate.campaigns.compare.interleave import A, B, abba_order
from flowrate.results.verdict import ratio_ci

side_by_side = load_benchmark("side_by_side")


def test_the_sides_run_in_abba_order_and_the_ratio_is_of_the_means() -> None:
    calls: list[str] = []
    a_values, b_values = iter([10.0, 12.0, 11.0]), iter([9.0, 11.0, 10.0])

    def run_a() -> float:
        calls.append("A")
        return next(a_values)

    def run_b() -> float:
        calls.append("B")
        return next(b_values)

    compared = side_by_side.side_by_side(run_a, run_b, 3)
    assert calls == ["A", "B", "B", "A", "A", "B"]
    assert compared.a == (10.0, 12.0, 11.0)
    assert compared.b == (9.0, 11.0, 10.0)
    assert compared.ratio == pytest.approx(10 / 11)
    low, high = compared.interval
    assert (low, high) == ratio_ci([10.0, 12.0, 11.0], [9.0, 11.0, 10.0], level=0.95)
    assert low < 10 / 11 < high
    assert compared.describe() == f"B/A 0.909 [{low:.3f}, {high:.3f}] (95%, 3 runs a side)"


def test_whole_blocks_on_a_drifting_machine_are_paired_as_compare_pairs_them() -> None:
    import numpy as np

    from flowrate.results.blocks import block_test

    # the machine's speed halves and doubles between blocks; B is 0.9 of A within each block
    speed = [1.0, 1.0, 0.5, 0.5, 2.0, 2.0, 1.2, 1.2, 9.0]  # a round each; the last left out
    wobble = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 1.0]
    a = tuple(100.0 * s * w for s, w in zip(speed, wobble, strict=True))
    b = tuple(90.0 * s / w for s, w in zip(speed, wobble, strict=True))
    compared = side_by_side.SideBySide(a, b)
    expected = block_test(np.array([a[:8]]), np.array([b[:8]]), 1 - side_by_side.LEVEL)
    assert compared.paired and bool(expected.paired[0])
    assert compared.ratio == pytest.approx(float(np.exp(expected.log_ratio[0])))
    low, high = compared.interval
    assert (low, high) == pytest.approx(tuple(float(x[0]) for x in expected.interval(0.05)))
    unpaired = ratio_ci(a, b, level=0.95)
    assert high - low < (unpaired[1] - unpaired[0]) / 10  # the drift no longer counts as noise
    assert compared.describe().endswith("9 runs a side, paired by block)")


def test_one_run_a_side_has_a_ratio_and_no_interval() -> None:
    compared = side_by_side.side_by_side(lambda: 4.0, lambda: 5.0, 1)
    assert compared.ratio == 1.25
    assert compared.interval is None
    assert compared.describe() == "B/A 1.250 (no interval, 1 run a side)"


def test_two_sides_in_rounds_run_in_flowrates_abba_order() -> None:
    calls: list[str] = []
    side_by_side.in_rounds({A: lambda: calls.append(A), B: lambda: calls.append(B)}, 4)
    assert calls == abba_order(8)


def test_more_sides_turn_round_each_round_and_warmup_rounds_are_not_kept() -> None:
    calls: list[str] = []
    counter = iter(range(100))

    def side(name: str) -> Callable[[], tuple[str, int]]:
        def run() -> tuple[str, int]:
            calls.append(name)
            return name, next(counter)

        return run

    done = side_by_side.in_rounds({"x": side("x"), "y": side("y"), "z": side("z")}, 2, warmup=1)
    assert "".join(calls) == "xyzzyxxyz"
    assert done == {"x": (("x", 5), ("x", 6)), "y": (("y", 4), ("y", 7)), "z": (("z", 3), ("z", 8))}


def test_a_warmup_round_of_side_by_side_is_run_and_left_out() -> None:
    a_values, b_values = iter([100.0, 10.0, 11.0]), iter([50.0, 9.0, 10.0])
    compared = side_by_side.side_by_side(lambda: next(a_values), lambda: next(b_values), 2, warmup=1)
    assert (compared.a, compared.b) == ((10.0, 11.0), (9.0, 10.0))


def test_no_runs_is_refused() -> None:
    with pytest.raises(ValueError, match="runs must be 1 or more"):
        side_by_side.in_rounds({A: lambda: 1.0}, 0)


def test_coroutine_sides_are_awaited_in_the_same_order() -> None:
    calls: list[str] = []

    def side(name: str) -> Callable[[], Awaitable[int]]:
        async def run() -> int:
            calls.append(name)
            return len(calls)

        return run

    done = asyncio.run(side_by_side.in_rounds_async({A: side(A), B: side(B)}, 2, warmup=1))
    assert calls == abba_order(6)
    assert done == {A: (4, 5), B: (3, 6)}


# the scripts that measure two things (or more) against each other in rounds
COMPARING = (
    "child_startup",
    "ecosystem",
    "freed_memory",
    "generate",
    "generate_prefill",
    "loader",
    "overhead",
    "precision_formats",
    "scaling",
    "serve_client",
    "streaming",
)
# a round's order turned by hand: `if round_ % 2`, `… else reversed(order)`, `order.reverse()`,
# `tools[index % len(tools):] + …`
HAND_ORDER = re.compile(r"\bround_?\s*%\s*2\b|else\s+reversed\(|\.reverse\(\)|\[\s*\w+\s*%\s*len\(\w+\)\s*:")
OWN_ORDER = {"serve_peers": "each round's order rotates, with that round's load average in the report"}


def test_every_script_that_compares_sides_runs_them_through_side_by_side() -> None:
    for name in COMPARING:
        assert "from side_by_side import " in (BENCHMARKS / f"{name}.py").read_text(), name


def test_no_other_script_turns_the_order_of_its_rounds_by_hand() -> None:
    found = {
        path.stem
        for path in BENCHMARKS.glob("*.py")
        if path.stem != "side_by_side" and HAND_ORDER.search(path.read_text())
    }
    assert found == set(OWN_ORDER)
