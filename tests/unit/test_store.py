"""The results store: round trips, filters, references, sweeps, migration, and what it refuses."""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest

from factories import make_result
from flowrate.errors import FlowrateError
from flowrate.results.store import APPLICATION_ID, STORE_VERSION, RunFilter, Store, store_path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_run_round_trips_exactly_with_its_tags(tmp_path: Path) -> None:
    result = make_result(interval_rates=[10.0, 12.0, 11.0], samples_per_joule=3.5, mfu=0.4, final_loss=0.7)
    with Store(tmp_path / "s.db") as store:
        store.add(result, ["nightly", "a100"])
    with Store(tmp_path / "s.db", create=False) as store:
        [run] = store.runs()
    assert run.result == result
    assert run.result.to_json() == result.to_json()
    assert run.tags == ("a100", "nightly")
    assert (run.run_id, run.problem, run.size, run.precision, run.batch_size) == (
        result.run_id,
        "fc_mnist",
        "debug",
        "fp32",
        8,
    )
    assert run.samples_per_sec == result.summary.samples_per_sec
    assert (run.samples_per_joule, run.mfu, run.final_loss, run.peak_memory_bytes) == (
        3.5,
        0.4,
        0.7,
        100_000_000,
    )


def test_a_new_store_is_marked_versioned_and_in_wal_mode(tmp_path: Path) -> None:
    Store(tmp_path / "s.db").close()
    db = sqlite3.connect(tmp_path / "s.db")
    assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert db.execute("PRAGMA user_version").fetchone()[0] == STORE_VERSION
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_filters_select_by_problem_device_precision_tag_and_date(tmp_path: Path) -> None:
    runs = {
        "old": make_result(created_at="2026-10-01T12:00:00+00:00"),
        "bf16": make_result(precision="bf16", created_at="2026-11-20T12:00:00+00:00"),
        "gpu": make_result(
            device_type="cuda", device_name="NVIDIA H100 80GB HBM3", created_at="2026-11-21T00:00:00+00:00"
        ),
        "gpt": make_result(problem="transformer", size="gpt2", created_at="2026-11-21T23:59:59+00:00"),
    }
    with Store(tmp_path / "s.db") as store:
        for name, result in runs.items():
            store.add(result, [name])

        def ids(**where: str) -> set[str]:
            return {r.tags[0] for r in store.runs(RunFilter(**where))}  # type: ignore[arg-type]

        assert ids() == set(runs)
        assert ids(problem="transformer") == {"gpt"}
        assert ids(problem="transformer/gpt2") == {"gpt"}
        assert ids(problem="transformer/debug") == set()
        assert ids(device="h100") == {"gpu"}
        assert ids(device="cuda") == {"gpu"}
        assert ids(device="cpu") == {"old", "bf16", "gpt"}
        assert ids(precision="bf16") == {"bf16"}
        assert ids(tag="old") == {"old"}
        assert ids(since="2026-11-20") == {"bf16", "gpu", "gpt"}
        assert ids(until="2026-11-20") == {"old", "bf16"}  # a date is inclusive
        assert ids(since="2026-11-21T00:00:00", until="2026-11-21") == {"gpu", "gpt"}
        newest = store.runs(RunFilter(limit=2))
        assert [r.tags[0] for r in newest] == ["gpt", "gpu"]
        with pytest.raises(FlowrateError, match="--since: cannot read 'yesterday'"):
            store.runs(RunFilter(since="yesterday"))


def test_references_are_ids_prefixes_or_tags(tmp_path: Path) -> None:
    a = make_result(run_id="abcd00000001")
    b = make_result(run_id="abcd10000002")
    with Store(tmp_path / "s.db") as store:
        store.add(a, ["base"])
        store.add(b, ["base", "new"])
        assert store.get("abcd00000001").result == a
        assert store.get("abcd1").run_id == b.run_id
        assert [r.run_id for r in store.resolve("new")] == [b.run_id]
        assert {r.run_id for r in store.resolve("base")} == {a.run_id, b.run_id}
        with pytest.raises(FlowrateError, match="'abcd' names 2 runs"):
            store.get("abcd")
        with pytest.raises(FlowrateError, match="'nothing' is no run id, tag or result file"):
            store.resolve("nothing")
        with pytest.raises(FlowrateError, match="already in the store"):
            store.add(a)
        assert store.all_tags() == {"base": 2, "new": 1}


def test_add_many_is_all_or_nothing_and_keeps_runs_already_there(tmp_path: Path) -> None:
    kept = make_result(run_id="feed00000001")
    with Store(tmp_path / "s.db") as store:
        store.add(kept, ["original"])
        added = store.add_many([(kept, ["imported"]), (make_result(run_id="feed00000002"), [])])
        assert added == ["feed00000002"]
        assert store.get("feed00000001").tags == ("original",)
        with pytest.raises(FlowrateError):
            store.add_many(
                [
                    (make_result(run_id="feed00000003"), []),
                    (dataclasses.replace(make_result(), run_id=""), []),
                ]
            )
        assert len(store.runs()) == 2  # the failed batch left nothing behind


def test_sweep_points_are_recorded_with_their_run_in_one_transaction(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        assert store.open_sweep("s1", "grid", {"grid": {"batch_size": [1, 2]}}) is True
        assert store.open_sweep("s1", "grid", {"grid": {"batch_size": [1, 2]}}) is False
        result = make_result()
        store.record_point("s1", {"batch_size": 1}, "done", result=result, tags=["sweep:grid"])
        store.record_point("s1", {"batch_size": 2}, "failed", reason="out of memory")
        points = store.sweep_points("s1")
        assert {p.params["batch_size"]: (p.status, p.run_id, p.reason) for p in points.values()} == {
            1: ("done", result.run_id, None),
            2: ("failed", None, "out of memory"),
        }
        assert [r.run_id for r in store.runs(RunFilter(sweep="grid"))] == [result.run_id]
        assert [r.run_id for r in store.runs(RunFilter(sweep="s1"))] == [result.run_id]
        [summary] = store.sweeps()
        assert (summary["done"], summary["failed"], summary["skipped"]) == (1, 1, 0)
        # a point whose run cannot be stored is not recorded either
        with pytest.raises(FlowrateError):
            store.record_point("s1", {"batch_size": 4}, "done", result=result)
        assert len(store.sweep_points("s1")) == 2


def test_a_version_1_store_migrates_with_its_runs_tags_and_new_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(FIXTURES / "store-v1.db", path)
    with Store(path) as store:
        assert store.version() == STORE_VERSION
        runs = {r.run_id: r for r in store.runs()}
        assert set(runs) == {"0000000000a1", "0000000000b2"}
        first, second = runs["0000000000a1"], runs["0000000000b2"]
        assert first.tags == ("baseline", "v1") and second.tags == ("v1",)
        # columns added by version 2, filled from the stored JSON
        assert (first.samples_per_joule, first.peak_memory_bytes, first.final_loss) == (4.5, 2_000_000, None)
        assert (second.samples_per_joule, second.final_loss) == (None, 0.25)
        assert first.result.summary.samples_per_sec == pytest.approx(100.0)
        # and the migrated store takes new runs and sweeps
        store.add(make_result(), ["after"])
        store.open_sweep("s", "s", {})
        assert len(store.runs()) == 3


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"this is not a database at all" * 100, "is not a flowrate results store"),
        (b"SQLite format 3\x00" + b"\xff" * 4000, "is not a flowrate results store"),
    ],
)
def test_a_corrupt_store_is_refused_and_left_untouched(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "s.db"
    path.write_bytes(content)
    before = digest(path)
    with pytest.raises(FlowrateError, match=message):
        Store(path)
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]  # no journal or WAL left beside it


def test_a_damaged_page_is_reported_not_raised_as_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Store(path) as store:
        for _ in range(30):
            store.add(make_result(interval_rates=[100.0] * 50))
    data = bytearray(path.read_bytes())
    page = 4096
    data[3 * page : 6 * page] = b"\x13" * (3 * page)  # scribble over pages of the runs table
    path.write_bytes(bytes(data))
    with pytest.raises(FlowrateError, match=r"could not be used|not a flowrate results store"):  # noqa: SIM117
        with Store(path) as store:
            [r.result for r in store.runs()]


def test_a_store_from_a_newer_flowrate_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {STORE_VERSION + 1}")
    db.commit()
    db.close()
    before = digest(path)
    with pytest.raises(FlowrateError, match=f"newer flowrate \\(store version {STORE_VERSION + 1}.*upgrade"):
        Store(path)
    assert digest(path) == before


def test_another_programs_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE things (x)")
    db.commit()
    db.close()
    before = digest(path)
    with pytest.raises(FlowrateError, match="an SQLite database but not a flowrate results store"):
        Store(path)
    assert digest(path) == before


def test_reading_a_missing_store_says_where_runs_are_recorded(tmp_path: Path) -> None:
    with pytest.raises(FlowrateError, match=r"no results store at .*flowrate run"):
        Store(tmp_path / "none.db", create=False)
    assert not (tmp_path / "none.db").exists()


def test_the_store_path_comes_from_the_flag_then_the_environment_then_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLOWRATE_STORE", "/somewhere/env.db")
    assert store_path("given.db") == Path("given.db")
    assert store_path() == Path("/somewhere/env.db")
    monkeypatch.delenv("FLOWRATE_STORE")
    assert store_path() == Path("flowrate.db")
