"""What a rung costs and runs: the replayed cost of a recorded point (start-up, preheat steps,
timed steps), the fewer steps of a short rung (the same for the replay and the real runs), and the
space-filling initial design the search starts from."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from explore_grid import write_table

from flowrate.campaigns.explore import Exploration
from flowrate.campaigns.explore_fidelity import Fidelity, loop_steps
from flowrate.campaigns.explore_objectives import parse_objectives
from flowrate.campaigns.explore_plan import Budget, Evaluation, ExploreSpec, space_filling
from flowrate.campaigns.explore_run import rung_config
from flowrate.campaigns.explore_table import TableEvaluator, load_table

OBJECTIVES = parse_objectives(["samples_per_sec:max", "peak_memory_bytes:min"])
COMMAND = "flowrate sweep -p transformer --duration 1 --preheat 2 --min-steps 3 -g batch_size=8,128"


def _point(batch: int, rate: float, wall_s: float) -> dict[str, object]:
    return {
        "params": {"batch_size": batch},
        "samples_per_sec": {"mean": rate, "sd": 0.1 * rate},
        "peak_memory_bytes": {"mean": 1e8 * batch, "sd": None},
        "wall_s": wall_s,
        "status": "done",
    }


def _table(tmp_path: Path, **extra: object) -> Path:
    data = {
        "command": COMMAND,
        "duration_s": 1.0,
        "startup_s": 6.0,
        # a fast point (a step of 0.01 s: the duration binds) and a slow one (20 s: the steps bind)
        "points": [_point(8, 800.0, 7.0), _point(128, 6.4, 130.0)],
        **extra,
    }
    path = tmp_path / "grid.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_short_rung_runs_proportionally_fewer_preheat_and_minimum_steps() -> None:
    assert loop_steps(1.0, 5, 10) == (5, 10)
    assert loop_steps(1 / 3, 5, 10) == (2, 4)
    assert loop_steps(1 / 3, 2, 3) == (2, 2)  # never below 2 ...
    assert loop_steps(1 / 9, 1, 1) == (1, 1)  # ... unless the full run has fewer


def test_a_replayed_run_costs_its_start_up_preheat_and_timed_steps(tmp_path: Path) -> None:
    table = load_table(_table(tmp_path))
    assert (table.preheat_steps, table.min_steps) == (2, 3)  # from the recorded command
    fast, slow = (table.points[k] for k in sorted(table.points, key=lambda k: table.points[k].wall_s))
    assert fast.step_s == pytest.approx(0.01) and slow.step_s == pytest.approx(20.0)
    assert table.cost(fast, 1.0) == (7.0, 1.0)  # a full run costs what it cost
    # start-up 7 - (2 x 0.01 + 1) = 5.98; a third of the duration: 2 preheat steps, 1/3 s timed
    cost, share = table.cost(fast, 1 / 3)
    assert cost == pytest.approx(5.98 + 0.02 + 1 / 3) and share == pytest.approx(1 / 3)
    # start-up 130 - (2 x 20 + 3 x 20) = 30; the rung's 2 minimum steps bind, not its 1/3 s
    cost, share = table.cost(slow, 1 / 3)
    assert cost == pytest.approx(30 + 40 + 40) and share == pytest.approx(2 / 3)
    keyed = load_table(_table(tmp_path, preheat_steps=1, min_steps=1))
    assert (keyed.preheat_steps, keyed.min_steps) == (1, 1)  # the table's keys over its command


def test_a_short_rung_draws_a_wider_spread_and_charges_its_cost(tmp_path: Path) -> None:
    table = load_table(_table(tmp_path))
    space = table.space()
    evaluate = TableEvaluator(table, space.base, seed=0)
    outcome = evaluate.one(Evaluation({"batch_size": 128}, 1 / 3, 0))
    assert outcome.cost_s == pytest.approx(110.0)
    assert outcome.noise["samples_per_sec"] == pytest.approx(0.64 * (3 / 2) ** 0.5)


def test_a_short_rung_runs_with_fewer_steps_for_real(tmp_path: Path) -> None:
    table = load_table(write_table(tmp_path))
    spec = ExploreSpec(table.space(), OBJECTIVES, fidelity=Fidelity.ladder(9.0, 1.0))
    params = {"size": "debug", "batch_size": 8, "precision": "fp32", "threads": 1, "compile": False}
    full = rung_config(spec, Evaluation(params, 9.0, 2))
    short = rung_config(spec, Evaluation(params, 1.0, 0))
    assert (full.duration_s, full.preheat_steps, full.min_steps) == (9.0, 5, 10)  # flowrate run's defaults
    assert (short.duration_s, short.preheat_steps, short.min_steps) == (1.0, 2, 2)
    assert short.replace(duration_s=9.0, preheat_steps=5, min_steps=10) == full


def test_the_initial_design_spreads_over_every_value_of_every_axis(tmp_path: Path) -> None:
    table = load_table(write_table(tmp_path))
    space = table.space()
    batches = next(a for a in space.axes if a.name == "batch_size").values
    design = space_filling(space, len(batches), random.Random(5))
    assert sorted(p["batch_size"] for p in design) == list(batches)  # each once
    for axis in space.axes:
        if len(axis.values) == 2:  # 7 points over 2 values: 3 and 4
            assert sorted(Counter(p[axis.name] for p in design).values()) == [3, 4]
    # a new study measures that design first
    spec = ExploreSpec(space, OBJECTIVES, fidelity=Fidelity((table.duration_s,)))
    seen: list[dict[str, object]] = []

    def evaluate(batch):  # type: ignore[no-untyped-def]
        seen.extend(e.params for e in batch)
        return TableEvaluator(table, space.base, 0)(batch)

    Exploration(spec, evaluate, budget=Budget(runs=10), seed=5, initial=len(batches)).run()
    assert seen[: len(design)] == space_filling(space, len(batches), random.Random(5))
