"""Issue 19's search-efficiency acceptance, replayed from a grid table (benchmarks/explore_efficiency.py
is the same code): explore with a quarter of the grid's runs reaches 95% of the grid frontier's
hypervolume and beats random search, on the synthetic grid of explore_grid.py and on each
recorded one (benchmarks/data)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from explore_grid import RECORDED_TABLES, benchmark_module, synthetic_table, table_point

from explore_table import GridTable, load_table
from flowrate.campaigns.explore.plan import DONE, Evaluated, Outcome


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> GridTable:
    path = tmp_path_factory.mktemp("grid") / "grid.json"
    path.write_text(json.dumps(synthetic_table()), encoding="utf-8")
    return load_table(path)


def _run(table: GridTable, seeds: int, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    bench = benchmark_module()
    result = bench.measure(table, bench.parse_objectives(bench.OBJECTIVES), range(seeds), with_halving=False)
    with capsys.disabled():
        bench.report(table, result, seeds)  # the distribution, in the test's output
    return result


def _acceptance(table: GridTable, capsys: pytest.CaptureFixture[str]) -> None:
    result = _run(table, 20, capsys)
    assert result.budget == round(0.25 * len(table.points))
    assert result.reached >= 18
    assert statistics.median(result.explore) > statistics.median(result.random)


@pytest.mark.slow  # 20 seeds of a replayed search: the recorded grids' acceptance below is the quick one
def test_over_twenty_seeds_explore_reaches_95_percent_in_18_and_beats_random(
    synthetic: GridTable, capsys: pytest.CaptureFixture[str]
) -> None:
    _acceptance(synthetic, capsys)


# the first recorded grid in the default run, the others (the same check on other machines' grids,
# ~15 s each) with the slow tests
@pytest.mark.parametrize(
    "recorded",
    [pytest.param(p, marks=[pytest.mark.slow] if n else []) for n, p in enumerate(RECORDED_TABLES)],
    ids=lambda path: path.stem,
)
def test_the_acceptance_on_each_recorded_grid(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _acceptance(load_table(recorded), capsys)


def test_the_oracle_screens_every_configuration_and_lets_only_their_frontier_go_on(
    tmp_path: Path,
) -> None:

    data = {
        "command": "flowrate sweep --duration 1 --preheat 2 --min-steps 3",
        "duration_s": 1.0,
        "startup_s": 6.0,
        # steps of 0.01, 0.01 and 0.1 s; start-ups 5.98, 6.98 and 7.8 s; batch 32 is dominated
        "points": [table_point(8, 800.0, 7.0), table_point(16, 1600.0, 8.0), table_point(32, 320.0, 9.0)],
    }
    path = tmp_path / "grid.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    table = load_table(path)
    bench = benchmark_module()
    shortest = bench.ladder(table).durations[0]
    assert shortest == pytest.approx(10 / 9)
    looked = [Evaluated(str(b), {"batch_size": b}, 0, 10.0, Outcome(DONE, {}, {}, 0.0)) for b in (8, 16, 32)]
    # each to the lowest rung in a run that may go on (its start-up, a full run's 5 preheat steps,
    # 10/9 s), then batch 8 and 16 go on to full length in the same run (10 - 10/9 s more each):
    # (5.98 + 0.05 + 6.98 + 0.05 + 7.8 + 0.5 + 3 x 10/9) + 2 x (10 - 10/9)
    spent = bench._oracle(table, bench.parse_objectives(bench.OBJECTIVES), looked, shortest)
    assert spent == pytest.approx(21.36 + 30 / 9 + 2 * (10 - 10 / 9))
