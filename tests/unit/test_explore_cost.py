"""What a rung costs and runs: the replayed cost of a recorded point (start-up, preheat steps,
timed steps), the fewer steps of a short rung (the same for the replay and the real runs), and the
space-filling initial design the search starts from."""

from __future__ import annotations

import dataclasses
import json
import random
from collections import Counter
from pathlib import Path

import pytest
from explore_grid import benchmark_module, table_point, write_table

from explore_table import TableEvaluator, load_table
from flowrate.campaigns.explore.engine import Exploration
from flowrate.campaigns.explore.evaluate import rung_config
from flowrate.campaigns.explore.objectives import parse_objectives
from flowrate.campaigns.explore.plan import Budget, Evaluation, ExploreSpec, space_filling
from flowrate.campaigns.process.job import Job, JobKind
from flowrate.campaigns.rungs.ladder import Continuation, Fidelity, Measured, loop_steps
from flowrate.results.store import point_key

OBJECTIVES = parse_objectives(["samples_per_sec:max", "peak_memory_bytes:min"])
COMMAND = "flowrate sweep -p transformer --duration 1 --preheat 2 --min-steps 3 -g batch_size=8,128"


def _table(tmp_path: Path, **extra: object) -> Path:
    data = {
        "command": COMMAND,
        "duration_s": 1.0,
        "startup_s": 6.0,
        # a fast point (a step of 0.01 s: the duration binds) and a slow one (20 s: the steps bind)
        "points": [table_point(8, 800.0, 7.0), table_point(128, 6.4, 130.0)],
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


def test_a_replayed_run_costs_its_start_up_preheat_and_timed_steps_at_a_users_full_length(
    tmp_path: Path,
) -> None:
    table = load_table(_table(tmp_path))
    assert (table.preheat_steps, table.min_steps) == (2, 3)  # from the recorded command
    assert table.full_s == 10.0  # flowrate run's default duration, with its 5 preheat, 10 minimum steps
    fast, slow = (table.points[k] for k in sorted(table.points, key=lambda k: table.points[k].wall_s))
    assert fast.step_s == pytest.approx(0.01) and slow.step_s == pytest.approx(20.0)
    # start-up: the recorded wall less its recorded steps: 7 - (2 x 0.01 + 1) and 130 - (2 x 20 + 3 x 20)
    assert table.startup(fast) == pytest.approx(5.98) and table.startup(slow) == pytest.approx(30.0)
    # full length: 5 preheat steps, then 10 s (the duration binds) or 10 steps of 20 s (the steps bind)
    assert table.cost(fast, 10.0) == pytest.approx(5.98 + 0.05 + 10.0)
    assert table.cost(slow, 10.0) == pytest.approx(30.0 + 100.0 + 200.0)
    # the lowest rung (10/9 s): 2 preheat and 2 minimum steps (loop_steps(1/9, 5, 10))
    assert table.cost(fast, 10 / 9) == pytest.approx(5.98 + 0.02 + 10 / 9)
    assert table.cost(slow, 10 / 9) == pytest.approx(30.0 + 40.0 + 40.0)
    # the middle rung (10/3 s): 2 preheat and 4 minimum steps
    assert table.cost(slow, 10 / 3) == pytest.approx(30.0 + 40.0 + 80.0)
    # a full length equal to the recorded one still runs flowrate run's default steps, not the table's
    same = dataclasses.replace(table, full_s=1.0)
    assert same.cost(fast, 1.0) == pytest.approx(5.98 + 0.05 + 1.0)
    keyed = load_table(_table(tmp_path, preheat_steps=1, min_steps=1))
    assert (keyed.preheat_steps, keyed.min_steps) == (1, 1)  # the table's keys over its command
    assert keyed.startup(slow) == pytest.approx(130.0 - 20.0 - 20.0)


def test_an_out_of_memory_point_costs_its_recorded_wall_at_any_length(tmp_path: Path) -> None:
    oom = {**table_point(256, 1.0, 9.0), "status": "oom"}
    del oom["samples_per_sec"], oom["peak_memory_bytes"]
    table = load_table(_table(tmp_path, points=[table_point(8, 800.0, 7.0), oom]))
    point = table.get({"batch_size": 256})
    assert table.cost(point, 10 / 9) == table.cost(point, 10.0) == 9.0
    outcome = TableEvaluator(table, {}, seed=0).one(Evaluation({"batch_size": 256}, 10 / 9, 0))
    assert (outcome.status, outcome.cost_s) == ("oom", 9.0)


def test_every_rung_draws_the_recorded_spread_and_charges_its_cost(tmp_path: Path) -> None:
    table = load_table(_table(tmp_path))
    evaluate = TableEvaluator(table, table.space().base, seed=0)
    short = evaluate.one(Evaluation({"batch_size": 128}, 10 / 9, 0))
    full = evaluate.one(Evaluation({"batch_size": 128}, 10.0, 2))
    assert (short.cost_s, full.cost_s) == (pytest.approx(110.0), pytest.approx(330.0))
    # measured at the lowest rung; an upper bound at full length, never scaled down
    assert short.noise["samples_per_sec"] == full.noise["samples_per_sec"] == pytest.approx(0.64)
    assert short.noise["peak_memory_bytes"] == 0.0  # no spread recorded


def test_a_run_that_goes_on_pays_its_start_up_once_and_each_rung_what_it_adds(tmp_path: Path) -> None:
    table = load_table(_table(tmp_path))
    evaluate = TableEvaluator(table, table.space().base, seed=0)
    durations = (10 / 9, 10 / 3, 10.0)
    objectives = (("samples_per_sec", True), ("peak_memory_bytes", False))
    nobody = Continuation(durations, ((), ()), objectives)
    went = evaluate.one(Evaluation({"batch_size": 128}, 10 / 9, 0, nobody))
    # start-up 30, a full run's 5 preheat steps of 20 s, then the rungs' 2, 4 and 10 minimum steps
    assert [went.cost_s] + [o.cost_s for o in went.higher] == pytest.approx([170.0, 40.0, 120.0])
    assert went.cost_s + sum(o.cost_s for o in went.higher) == pytest.approx(
        table.cost(table.points[point_key({**table.space().base, "batch_size": 128})], 10.0)
    )
    fast = Measured("fast", (1e9, -1.0), (0.0, 0.0))
    beaten = Continuation(durations, ((fast,), ()), objectives)
    stopped = evaluate.one(Evaluation({"batch_size": 128}, 10 / 9, 0, beaten))
    assert stopped.higher == () and stopped.cost_s == pytest.approx(170.0)


def test_the_benchmark_models_the_ladder_explore_builds_from_the_table_to_full_length(
    tmp_path: Path,
) -> None:
    table = load_table(_table(tmp_path))
    bench = benchmark_module()
    # what `flowrate explore --duration 10 --min-duration 1` builds (cli/explore.py: Fidelity.ladder)
    assert bench.ladder(table) == Fidelity.ladder(10.0, 1.0)
    assert bench.ladder(table).durations == pytest.approx((10 / 9, 10 / 3, 10.0))


def test_a_short_rung_runs_with_fewer_steps_for_real(tmp_path: Path) -> None:
    table = load_table(write_table(tmp_path))
    spec = ExploreSpec(table.space(), OBJECTIVES, fidelity=Fidelity.ladder(9.0, 1.0))
    params = {"size": "debug", "batch_size": 8, "precision": "fp32", "threads": 1, "compile": False}
    full = rung_config(spec, Evaluation(params, 9.0, 2)).config
    short = rung_config(spec, Evaluation(params, 1.0, 0)).config
    assert (full.duration_s, full.preheat_steps, full.min_steps) == (9.0, 5, 10)  # flowrate run's defaults
    assert (short.duration_s, short.preheat_steps, short.min_steps) == (1.0, 2, 2)
    assert short.replace(duration_s=9.0, preheat_steps=5, min_steps=10) == full
    # one that may go on runs at full length, told each lower rung's duration and minimum steps
    then = Continuation((1.0, 3.0, 9.0), ((), ()), (("samples_per_sec", True),))
    going = rung_config(spec, Evaluation(params, 1.0, 0, then))
    assert going.kind == JobKind.CONTINUE and going.config == full
    assert rung_config(spec, Evaluation(params, 9.0, 2)) == Job(full)  # a plain run
    assert json.loads(going.plan) == {"continuation": then.to_dict(), "min_steps": [2, 4]}


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
