"""The noise model (flowrate.results.noise) on hand-made runs: every figure known in advance."""

from __future__ import annotations

import dataclasses
import math

import pytest

import factories
from flowrate.analysis.compare_recorded import Judging, compare_recorded
from flowrate.results.compare import Comparison, History
from flowrate.results.noise import (
    ProcessPoint,
    block_cv,
    configuration_key,
    history_for,
    history_in_store,
    noise_of,
    noise_table,
    process_points,
    session_of,
)
from flowrate.results.schema import Result
from flowrate.results.sections import Repeat, RepeatRun
from flowrate.results.store import Store, StoredRun


def made(
    median: float, run_id: str, commit: str | None = "c1", *, batch_size: int = 8, host: str = "testhost"
) -> Result:
    code = {"flowrate": {"version": "0.1.0", "commit": commit, "dirty": False}, "hostname": host}
    rates = [median * f for f in (0.95, 1.0, 1.05)]
    return factories.make_result(interval_rates=rates, run_id=run_id, environment=code, batch_size=batch_size)


def point(
    value: float, commit: str, within: float = 0.05, intervals: int = 25, session: str | None = None
) -> ProcessPoint:
    return ProcessPoint("r", value, within, intervals, "2026-11-20T10:00:00+00:00", commit, False, session)


def test_a_run_is_one_process_and_a_repeat_result_is_several() -> None:
    (single,) = process_points(made(1000.0, "a1"))
    assert (single.run_id, single.value, single.intervals, single.commit) == ("a1", 1000.0, 3, "c1")
    assert single.within_cv == pytest.approx(0.05)
    repeated = dataclasses.replace(
        made(1000.0, "a2"),
        repeat=Repeat(
            runs=[
                RepeatRun(run_id="p1", median_samples_per_sec=990.0, cv=0.01, intervals=10),
                RepeatRun(run_id="p2", median_samples_per_sec=1010.0, cv=0.03, intervals=12),
            ]
        ),
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


def test_a_session_is_a_compare_run_or_a_repeat_result() -> None:
    assert session_of(["nightly", "compare:3f9a01bc:B"]) == "compare:3f9a01bc"
    assert session_of(["compare", "compare:x", "compare:a:b:c"]) is None  # not `compare --run`'s tags
    assert process_points(made(1000.0, "a1"))[0].session is None
    assert process_points(made(1000.0, "a1"), "compare:s1")[0].session == "compare:s1"
    repeated = dataclasses.replace(
        made(1000.0, "a2"), repeat=Repeat(runs=[RepeatRun(run_id="p1", median_samples_per_sec=990.0)])
    )
    assert process_points(repeated)[0].session == "repeat:a2"


def test_drift_between_sessions_is_not_noise() -> None:
    # one commit, two sessions 10% apart (the machine drifted between them): each session's
    # runs differ by ±1%, which is the noise an interleaved comparison sees
    first = [point(v, "a", session="compare:s1") for v in (100.0, 101.0, 99.0)]
    second = [point(v, "a", session="compare:s2") for v in (110.0, 111.1, 108.9)]
    between, _, _ = noise_of(first + second)
    assert between == pytest.approx(0.01)  # √((2 · 0.01² + 2 · 0.01²) / 4)
    # without sessions the drift counts: the six values' spread about their mean 105, 5 d.f.
    unsessioned = [dataclasses.replace(p, session=None) for p in first + second]
    squares = (5**2 + 4**2 + 6**2 + 5**2 + 6.1**2 + 3.9**2) / 105**2
    assert noise_of(unsessioned)[0] == pytest.approx((squares / 5) ** 0.5)


def test_history_in_store_pools_each_comparison_apart(tmp_path) -> None:
    store = tmp_path / "runs.db"
    sessions = {"s1": (1000.0, 1010.0, 990.0), "s2": (1100.0, 1111.0, 1089.0)}
    with Store(store) as opened:
        for name, values in sessions.items():
            for i, value in enumerate(values):
                opened.add(made(value, f"{name}r{i}"), tags=[f"compare:{name}:{'AB'[i % 2]}"])
    compared = [made(1000.0, "new1"), made(1000.0, "new2")]
    known = history_in_store(store, compared[:1], compared[1:])
    assert known == History(cv=pytest.approx(0.01), runs=5)  # 4 degrees of freedom, CV 1%
    assert history_in_store(tmp_path / "absent.db", compared[:1], compared[1:]) is None


def test_history_in_store_reads_the_newest_runs_of_the_configuration_only(tmp_path, monkeypatch) -> None:
    from flowrate.results import noise

    monkeypatch.setattr(noise, "HISTORY_RUNS", 4)
    store = tmp_path / "runs.db"

    def at(value: float, run_id: str, hour: int, batch_size: int = 8) -> Result:
        code = {"flowrate": {"version": "0.1.0", "commit": "c1", "dirty": False}, "hostname": "testhost"}
        rates = [value * f for f in (0.95, 1.0, 1.05)]
        when = f"2026-11-20T{hour:02d}:00:00+00:00"
        return factories.make_result(
            interval_rates=rates, run_id=run_id, environment=code, batch_size=batch_size, created_at=when
        )

    with Store(store) as opened:
        for i, value in enumerate((1000.0, 1200.0, 800.0, 1100.0)):  # old and noisy: CV 17%
            opened.add(at(value, f"old{i}", 1 + i), tags=["compare:old:A"])
        for i, value in enumerate((1000.0, 1010.0, 990.0, 1000.0)):  # newer, CV 0.8%
            opened.add(at(value, f"new{i}", 10 + i), tags=["compare:new:A"])
        for i in range(6):  # the newest of all, at another batch size: another configuration
            opened.add(at(500.0 * (1 + i % 2), f"b16r{i}", 20 + i, batch_size=16), tags=["compare:b16:A"])
    compared = [at(1000.0, "x1", 23), at(1000.0, "x2", 23)]
    known = history_in_store(store, compared[:1], compared[1:])
    assert known == History(cv=pytest.approx((200 / 3 / 1000**2) ** 0.5), runs=4)  # the newer four
    monkeypatch.setattr(noise, "HISTORY_RUNS", 8)
    both = history_in_store(store, compared[:1], compared[1:])
    assert both is not None and both.runs == 7 and both.cv > 0.05  # the old ones count too


def test_a_recorded_comparison_is_judged_with_the_stores_noise_only_when_asked(tmp_path) -> None:
    store = tmp_path / "runs.db"
    with Store(store) as opened:
        for name, values in {"s1": (1000.0, 1010.0, 990.0), "s2": (1100.0, 1111.0, 1089.0)}.items():
            for i, value in enumerate(values):
                opened.add(made(value, f"{name}r{i}"), tags=[f"compare:{name}:{'AB'[i % 2]}"])
    a, b = [StoredRun.from_result(made(1000.0, "new1"))], [StoredRun.from_result(made(1060.0, "new2"))]
    judged = compare_recorded(store, a, b, ("A", "B"), Judging())
    assert isinstance(judged, Comparison)
    assert judged.history == History(cv=pytest.approx(0.01), runs=5)
    throughput = judged.metric("samples_per_sec")
    assert throughput is not None and (throughput.verdict, throughput.reason) == (
        "faster",
        "p = 0.015, +6.0%",
    )
    alone = compare_recorded(store, a, b, ("A", "B"), Judging(history=False))
    assert isinstance(alone, Comparison) and alone.history is None
    unjudged = alone.metric("samples_per_sec")
    assert unjudged is not None and unjudged.verdict == "n/a"  # one run a side: no verdict


def test_the_blocks_cv_is_the_pure_error_of_each_sessions_a_b_b_a_blocks() -> None:
    runs = [
        ("s1", "A", 100.0), ("s1", "B", 90.0), ("s1", "B", 99.0), ("s1", "A", 110.0),
        ("s2", "A", 50.0), ("s2", "B", 50.0), ("s2", "A", 55.0), ("s2", "B", 60.0),  # not A B B A
        ("s1", "A", 100.0), ("s1", "B", 100.0), ("s1", "B", 100.0), ("s1", "A", 100.0),
        ("s1", "pilot", 1.0),
    ]  # fmt: skip
    cv, df = block_cv(runs)
    squares = (math.log(100 / 110) ** 2 + math.log(90 / 99) ** 2) / 2  # the first block; the second adds 0
    assert df == 4 and cv == pytest.approx(math.sqrt(squares / 4))
    assert block_cv([]) == (None, 0)


def test_history_in_store_gives_the_blocks_cv_of_earlier_comparisons(tmp_path) -> None:
    store = tmp_path / "runs.db"
    values = (100.0, 90.0, 99.0, 110.0, 100.0, 100.0, 100.0, 100.0)
    with Store(store) as opened:
        for i, value in enumerate(values):
            when = f"2026-11-20T10:00:{i:02d}+00:00"
            run = dataclasses.replace(made(value, f"r{i}"), created_at=when)
            opened.add(run, tags=["compare:s1", f"compare:s1:{'ABBA'[i % 4]}"])
    compared = [made(1000.0, "new1"), made(1000.0, "new2")]
    known = history_in_store(store, compared[:1], compared[1:])
    assert known is not None and known.block_df == 4
    expected, _ = block_cv([("s", "ABBA"[i % 4], v) for i, v in enumerate(values)])
    assert known.block_cv == pytest.approx(expected)
    # runs recorded within one second (created_at is to the second) are read in the order they ran
    with Store(tmp_path / "fast.db") as opened:
        for i, value in enumerate(values):
            run = dataclasses.replace(made(value, f"f{i}"), created_at="2026-11-20T10:00:00+00:00")
            opened.add(run, tags=["compare:s2", f"compare:s2:{'ABBA'[i % 4]}"])
    fast = history_in_store(tmp_path / "fast.db", compared[:1], compared[1:])
    assert fast is not None and (fast.block_df, fast.block_cv) == (4, pytest.approx(expected))
