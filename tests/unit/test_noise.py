"""The noise model (flowrate.results.noise) on hand-made runs: every figure known in advance."""

from __future__ import annotations

import dataclasses

import pytest

import factories
from flowrate.results.compare import History
from flowrate.results.noise import (
    ProcessPoint,
    configuration_key,
    history_for,
    noise_of,
    noise_table,
    process_points,
)
from flowrate.results.schema import Result


def made(
    median: float, run_id: str, commit: str | None = "c1", *, batch_size: int = 8, host: str = "testhost"
) -> Result:
    code = {"flowrate": {"version": "0.1.0", "commit": commit, "dirty": False}, "hostname": host}
    rates = [median * f for f in (0.95, 1.0, 1.05)]
    return factories.make_result(interval_rates=rates, run_id=run_id, environment=code, batch_size=batch_size)


def point(value: float, commit: str, within: float = 0.05, intervals: int = 25) -> ProcessPoint:
    return ProcessPoint("r", value, within, intervals, "2026-11-20T10:00:00+00:00", commit, False)


def test_a_run_is_one_process_and_a_repeat_result_is_several() -> None:
    (single,) = process_points(made(1000.0, "a1"))
    assert (single.run_id, single.value, single.intervals, single.commit) == ("a1", 1000.0, 3, "c1")
    assert single.within_cv == pytest.approx(0.05)
    repeated = dataclasses.replace(
        made(1000.0, "a2"),
        repeat={
            "runs": [
                {"run_id": "p1", "median_samples_per_sec": 990.0, "cv": 0.01, "intervals": 10},
                {"run_id": "p2", "median_samples_per_sec": 1010.0, "cv": 0.03, "intervals": 12},
            ]
        },
    )
    points = process_points(repeated)
    assert [(p.run_id, p.value, p.within_cv, p.intervals) for p in points] == [
        ("p1", 990.0, 0.01, 10),
        ("p2", 1010.0, 0.03, 12),
    ]


def test_between_within_and_intraclass_correlation() -> None:
    # two commits at different levels: the step between them is not noise
    points = [point(v, "a") for v in (100.0, 102.0, 98.0)] + [point(v, "b") for v in (200.0, 204.0, 196.0)]
    between, within, icc = noise_of(points)
    assert between == pytest.approx(0.02)  # √((4 · 0.02²) / 4 degrees of freedom)
    assert within == pytest.approx(0.05)
    # σ_b² = 0.02² − 0.05² / 25 = 0.0003; ICC = 0.0003 / (0.0003 + 0.05²)
    assert icc == pytest.approx(0.0003 / 0.0028)
    assert noise_of([point(100.0, "a")]) == (None, 0.05, None)


def test_noise_table_groups_by_configuration_and_machine() -> None:
    runs = [made(1000.0 + i, f"a{i}") for i in range(3)] + [made(500.0, "b0", batch_size=16)]
    runs.append(made(1000.0, "h0", host="elsewhere"))
    table = noise_table(runs)
    assert [(r.runs, r.configuration["batch_size"], r.machine["hostname"]) for r in table] == [
        (3, 8, "testhost"),
        (1, 16, "testhost"),
        (1, 8, "elsewhere"),
    ]
    assert table[0].mean_samples_per_sec == pytest.approx(1001.0)
    assert configuration_key(runs[0]) == configuration_key(runs[1]) != configuration_key(runs[3])


def test_history_for_leaves_out_the_compared_runs_and_other_configurations() -> None:
    recorded = [made(v, f"a{i}") for i, v in enumerate((1000.0, 1010.0, 990.0, 1020.0))]
    recorded += [made(v, f"o{i}", batch_size=16) for i, v in enumerate((500.0, 700.0))]
    known = history_for(recorded, [recorded[0]], exclude=["a3"])
    assert known == History(cv=pytest.approx(0.01), runs=3)
    assert history_for(recorded, [recorded[0]], exclude=["a2", "a3"]) is None  # two runs say too little
    # a commit's runs are compared with each other only
    split = [
        made(v, f"s{i}", commit=c)
        for i, (v, c) in enumerate(((1000.0, "x"), (1010.0, "x"), (800.0, "y"), (808.0, "y")))
    ]
    pooled = history_for(split, [split[0]])
    assert pooled is not None and pooled.runs == 3 and pooled.cv < 0.01
