"""A budget's comparison compared again from the store is paired as it was measured."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import factories
from flowrate.analysis.compare_recorded import Judging, compare_recorded
from flowrate.results.compare import Comparison, MetricComparison
from flowrate.results.run_design import RunDesign, design_tag, in_run_order, recorded_design
from flowrate.results.schema import Result
from flowrate.results.store import Store, StoredRun


def made(value: float, run_id: str, second: int) -> Result:
    rates = [value * f for f in (0.99, 1.0, 1.01)]
    created_at = f"2026-11-20T10:{second // 60:02d}:{second % 60:02d}+00:00"
    return factories.make_result(interval_rates=rates, run_id=run_id, created_at=created_at)


def recorded(store: Path, name: str, sides: dict[str, Sequence[float]], design: RunDesign | None) -> None:
    """Record each side's values in the order they ran (A's run i beside B's run i), as a live
    comparison named ``name`` tags them."""
    with Store(store) as opened:
        for i, pair in enumerate(zip(sides["A"], sides["B"], strict=True)):
            for label, value in zip("AB", pair, strict=True):
                tags = [name, f"{name}:{label}", *([] if design is None else [design_tag(name, design)])]
                opened.add(made(value, f"{name[-2:]}{label}{i:02d}", 10 * i), tags=tags)


def throughput(store: Path, name: str) -> MetricComparison:
    with Store(store) as opened:
        a, b = opened.resolve(f"{name}:A"), opened.resolve(f"{name}:B")
    compared = compare_recorded(store, a, b, (f"{name}:A", f"{name}:B"), Judging(history=False))
    assert isinstance(compared, Comparison)
    metric = compared.metric("samples_per_sec")
    assert metric is not None
    return metric


# each pair's processes share the machine's speed, which moves far from pair to pair; B is 5%
# slower within every pair, give or take 0.3%
SPEED = (1000.0, 1250.0, 880.0, 1120.0, 960.0, 1310.0)
SLOWER = (0.95, 0.953, 0.947, 0.952, 0.948, 0.95)
PAIRS = {"A": SPEED, "B": [v * f for v, f in zip(SPEED, SLOWER, strict=True)]}


def test_runs_that_took_turns_are_paired_by_pair_when_compared_again(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    recorded(store, "compare:0000aa01", PAIRS, RunDesign.TURNS)
    paired = throughput(store, "compare:0000aa01")
    assert paired.method.startswith("paired t-test of the pairs' log ratios (6 pairs")
    assert paired.verdict == "slower"
    # the same values without the tag are any recorded runs: unpaired, and the drift hides B's 5%
    recorded(store, "compare:0000aa02", PAIRS, None)
    unpaired = throughput(store, "compare:0000aa02")
    assert "Welch" in unpaired.method and unpaired.verdict == "not significant"


def test_runs_in_a_b_b_a_blocks_are_paired_by_block_when_compared_again(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    # three blocks of A B B A: the machine's speed moves between blocks, B is 3% slower in each
    speeds = (1000.0, 1300.0, 850.0)
    a = [s * f for s in speeds for f in (1.0, 1.004)]
    b = [s * f * 0.97 for s in speeds for f in (1.002, 0.998)]
    recorded(store, "compare:0000bb01", {"A": a, "B": b}, RunDesign.BLOCKS)
    blocks = throughput(store, "compare:0000bb01")
    assert blocks.method.startswith("paired t-test of the blocks' log ratios (3 A B B A blocks")
    assert blocks.verdict == "slower"


def test_a_design_counts_only_where_one_comparisons_tag_is_on_every_run() -> None:
    def run(*tags: str) -> StoredRun:
        return StoredRun.from_result(made(1000.0, "r", 0), tags)

    turns, blocks = "compare:0000aa01:turns", "compare:0000aa01:blocks"
    assert recorded_design([run(turns, "x")], [run(turns)]) is RunDesign.TURNS
    assert recorded_design([run(blocks)], [run(blocks)]) is RunDesign.BLOCKS
    assert recorded_design([run(turns), run()], [run(turns)]) is None  # one run without it
    assert recorded_design([run(turns)], [run("compare:0000aa02:turns")]) is None  # two comparisons
    assert recorded_design([run(turns)], []) is None
    assert recorded_design([run("mine:turns")], [run("mine:turns")]) is None  # not a comparison's


def test_a_side_is_put_back_in_the_order_it_ran_from_the_stores_newest_first() -> None:
    def run(run_id: str, second: int) -> StoredRun:
        return StoredRun.from_result(made(1000.0, run_id, second), ())

    # as the store lists them: newest second first, and within one second the last recorded first
    listed = [run("r4", 20), run("r3", 10), run("r2", 10), run("r1", 0)]
    assert [r.run_id for r in in_run_order(listed)] == ["r1", "r2", "r3", "r4"]
    shuffled = [listed[2], listed[0], listed[3], listed[1]]  # a file in any order: by created_at
    assert [r.run_id for r in in_run_order(shuffled)][::3] == ["r1", "r4"]
