"""The results store: round trips, filters, references, sweeps, migration, and what it refuses."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from factories import make_result
from flowrate.errors import ConfigError, FlowrateError
from flowrate.results.store import SkippedRunWarning, Store, store_path
from flowrate.results.store_filter import RunFilter
from flowrate.results.store_schema import APPLICATION_ID, STORE_VERSION
from flowrate.results.validate import InvalidResult

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
        with pytest.raises(ConfigError, match=r"^since: cannot read 'yesterday' as a date") as raised:
            store.runs(RunFilter(since="yesterday"))
        assert raised.value.field == "since"  # the CLI says --since, and exits 2 (bad input)


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
    with pytest.raises(FlowrateError, match=r"is damaged \(.*malformed.*move it aside") as raised:  # noqa: SIM117
        with Store(path) as store:
            [r.result for r in store.runs()]
    assert raised.value.exit_code == 2


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


# --- runs that cannot be read, tags, empty filters --------------------------------------------


def insert_raw(path: Path, run_id: str, result_json: str, **columns: object) -> None:
    """A row as an older flowrate (or a hand) wrote it, with the tag "t"."""
    values = {
        "run_id": run_id,
        "created_at": "2026-11-22T00:00:00+00:00",
        "problem": "fc_mnist",
        "samples_per_sec": 1.0,
        "result_json": result_json,
        **columns,
    }
    db = sqlite3.connect(path)
    marks = ", ".join("?" * len(values))
    db.execute(f"INSERT INTO runs ({', '.join(values)}) VALUES ({marks})", list(values.values()))
    db.execute("INSERT INTO tags (run_id, tag) VALUES (?, 't')", (run_id,))
    db.commit()
    db.close()


def test_a_run_that_cannot_be_read_is_skipped_with_a_warning_and_the_rest_still_read(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    good = make_result(run_id="0123456789ab")
    with Store(path) as store:
        store.add(good, ["t"])
    fast = good.to_dict() | {"run_id": "fa57fa57fa57"}
    fast["summary"] = fast["summary"] | {"samples_per_sec": "fast"}
    insert_raw(path, "fa57fa57fa57", json.dumps(fast))
    nan = good.to_dict() | {"run_id": "0000000000ff"}
    nan["summary"] = nan["summary"] | {"cv": math.nan}
    insert_raw(path, "0000000000ff", json.dumps(nan))  # an older flowrate wrote NaN
    insert_raw(path, "0000000000ee", good.to_json(), samples_per_sec=math.inf)  # disagrees, too
    insert_raw(path, "../../etc/passwd", json.dumps(good.to_dict() | {"run_id": "../../etc/passwd"}))
    with Store(path, create=False) as store:
        with pytest.warns(SkippedRunWarning) as caught:
            assert [r.run_id for r in store.runs()] == [good.run_id]
        messages = sorted(str(w.message) for w in caught)
        assert len(messages) == 4 and all("\n" not in m for m in messages)
        assert f"run '0000000000ee' in {path} is skipped: its samples_per_sec column holds inf" in messages
        assert (
            f"run '0000000000ff' in {path} is skipped: "
            "summary.cv must be null or a finite number >= 0, not nan" in messages
        )
        assert any("is skipped: run_id must be letters" in m for m in messages)
        assert (
            f"run 'fa57fa57fa57' in {path} is skipped: summary.samples_per_sec must be a finite number >= 0, "
            "not 'fast'" in messages
        )
        with pytest.warns(SkippedRunWarning):
            assert [r.run_id for r in store.resolve("t")] == [good.run_id]
        with (
            pytest.warns(SkippedRunWarning),
            pytest.raises(InvalidResult, match=r"run fa57fa57fa57 in .* cannot"),
        ):
            store.get("fa57")
        assert store.get(good.run_id).result == good


@pytest.mark.parametrize(
    ("tag", "message"),
    [
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        ("two\nlines", "control character or line break"),
        ("tab\there", "control character or line break"),
        ("\x1b[31mred", "control character or line break"),
        ("x" * 101, "is 101 characters; a tag has at most 100"),
        ("x" * 5000, "is 5000 characters"),
    ],
)
def test_a_tag_that_is_not_one_short_line_is_refused_and_nothing_is_stored(
    tmp_path: Path, tag: str, message: str
) -> None:
    with Store(tmp_path / "s.db") as store:
        kept = make_result()
        store.add(kept, ["ok", "x" * 100])
        store.open_sweep("s1", "grid", {})
        attempts = [
            lambda: store.add(make_result(), ["fine", tag]),
            lambda: store.add_many([(make_result(), ["fine"]), (make_result(), [tag])]),
            lambda: store.add_tags(kept.run_id, ["fine", tag]),
            lambda: store.record_point("s1", {"batch_size": 1}, "done", result=make_result(), tags=[tag]),
        ]
        for attempt in attempts:
            with pytest.raises(ConfigError) as raised:
                attempt()
            assert raised.value.field == "tag" and message in raised.value.message
            assert "\n" not in str(raised.value) and len(str(raised.value)) < 200
        assert [r.run_id for r in store.runs()] == [kept.run_id]
        assert store.all_tags() == {"ok": 1, "x" * 100: 1}
        assert store.sweep_points("s1") == {}


@pytest.mark.parametrize("name", ["tag", "problem", "device", "since", "sweep"])
def test_an_empty_filter_is_refused_not_ignored(name: str) -> None:
    for empty in ("", "  "):
        with pytest.raises(ConfigError, match="must not be empty") as raised:
            RunFilter(**{name: empty})  # type: ignore[arg-type]
        assert raised.value.field == name


def test_a_date_too_far_back_is_one_line_not_an_overflow(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store, pytest.raises(ConfigError, match="cannot read '99999999999d'"):
        store.runs(RunFilter(since="99999999999d"))


# --- read-only stores: read by readers, refused (with the reason) by writers --------------------

SRC = Path(__file__).resolve().parents[2] / "src"
PROBE = """
import json, sys
from flowrate.errors import FlowrateError
from flowrate.results.store import Store, check_writable
path, out = sys.argv[1], {}
try:
    with Store(path, create=False) as store:
        out["runs"] = [r.run_id for r in store.runs()]
        out["readonly"] = store.readonly
        try:
            store.add_tags(out["runs"][0], ["more"])
        except FlowrateError as error:
            out["tag_error"] = str(error)
except FlowrateError as error:
    out["read_error"] = str(error)
for name, attempt in (("check_error", lambda: check_writable(path)), ("write_error", lambda: Store(path))):
    try:
        attempt()
    except FlowrateError as error:
        out[name] = str(error)
print(json.dumps(out))
"""


@pytest.fixture
def shared_folder():  # type: ignore[no-untyped-def]
    """A folder another user can reach (pytest's tmp_path is private to this one); removed after."""
    folder = Path(tempfile.mkdtemp(prefix="flowrate-ro-"))
    folder.chmod(0o755)
    yield folder
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    shutil.rmtree(folder)


def probe(store: Path) -> dict[str, object]:
    """PROBE's findings about ``store``, as a user who cannot write it (root writes anything: the
    probe then runs as nobody)."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("root writes read-only files, and setpriv is missing to drop to another user")
        prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    done = subprocess.run(
        [*prefix, sys.executable, "-c", PROBE, str(store)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def make_store(folder: Path) -> tuple[Path, str]:
    folder.mkdir(mode=0o755)
    result = make_result()
    with Store(folder / "s.db") as store:
        store.add(result, ["kept"])
    (folder / "s.db").chmod(0o644)
    return folder / "s.db", result.run_id


def test_a_store_in_a_read_only_folder_reads_and_refuses_writers_with_the_reason(shared_folder: Path) -> None:
    store, run_id = make_store(shared_folder / "ro")
    store.chmod(0o666)  # the file is writable: only the folder is not
    store.parent.chmod(0o555)
    before = digest(store)
    found = probe(store)
    assert found["runs"] == [run_id] and found["readonly"] is True
    reason = f"is read-only: its folder {store.parent} is not writable by this user"
    assert reason in str(found["check_error"]) and reason in str(found["write_error"])
    assert reason in str(found["tag_error"])
    assert "--store" in str(found["write_error"]) and "\n" not in str(found["write_error"])
    assert sorted(p.name for p in store.parent.iterdir()) == ["s.db"]  # no -wal or -shm left
    assert digest(store) == before


def test_a_read_only_store_file_reads_and_refuses_writers_with_the_reason(shared_folder: Path) -> None:
    store, run_id = make_store(shared_folder / "rw")
    store.parent.chmod(0o777)  # the folder is writable: only the file is not
    store.chmod(0o444)
    before = digest(store)
    found = probe(store)
    assert found["runs"] == [run_id] and found["readonly"] is True
    assert f"the results store {store} is read-only: the file is not writable" in str(found["write_error"])
    assert sorted(p.name for p in store.parent.iterdir()) == ["s.db"]
    assert digest(store) == before


def test_a_read_only_store_with_a_writer_still_at_work_reads_what_it_wrote(shared_folder: Path) -> None:
    store, first = make_store(shared_folder / "busy")
    writer = sqlite3.connect(store, isolation_level=None)
    writer.execute("SELECT count(*) FROM runs")  # open: the last to close folds the -wal file in
    try:
        with Store(store) as opened:
            second = make_result()
            opened.add(second)
        (store.parent / "s.db-wal").chmod(0o644)
        (store.parent / "s.db-shm").chmod(0o644)
        store.parent.chmod(0o555)
        assert sorted(probe(store)["runs"]) == sorted([first, second.run_id])  # type: ignore[type-var]
    finally:
        writer.close()


def test_no_store_is_created_in_a_read_only_folder(shared_folder: Path) -> None:
    folder = shared_folder / "empty"
    folder.mkdir(mode=0o555)
    found = probe(folder / "new.db")
    assert "no results store at" in str(found["read_error"])
    assert f"cannot create the results store {folder / 'new.db'}: its folder {folder} is not writable" in str(
        found["write_error"]
    )
    assert list(folder.iterdir()) == []


def test_a_read_only_store_of_an_older_version_says_it_needs_one_upgrade(shared_folder: Path) -> None:
    folder = shared_folder / "old"
    folder.mkdir(mode=0o755)
    shutil.copy(FIXTURES / "store-v1.db", folder / "s.db")
    (folder / "s.db").chmod(0o644)
    folder.chmod(0o555)
    found = probe(folder / "s.db")
    assert "is at store version 1 and read-only" in str(found["read_error"])
    assert "make it writable once" in str(found["read_error"])


def test_a_handle_opened_readonly_refuses_writes(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        store.add(make_result())
    with Store(tmp_path / "s.db", readonly=True) as store:
        assert len(store.runs()) == 1
        with pytest.raises(FlowrateError, match="was opened for reading only"):
            store.add(make_result())
    with pytest.raises(FlowrateError, match="no results store at"):
        Store(tmp_path / "none.db", readonly=True)


def test_a_version_1_store_with_a_run_it_cannot_read_still_migrates(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(FIXTURES / "store-v1.db", path)
    db = sqlite3.connect(path)
    bad = make_result(run_id="0000000000c3").to_dict()
    bad["batch_size"] = "eight"
    db.execute(
        "INSERT INTO runs (run_id, created_at, problem, result_json) VALUES (?, ?, ?, ?)",
        ("0000000000c3", "2026-11-22T00:00:00+00:00", "fc_mnist", json.dumps(bad)),
    )
    db.commit()
    db.close()
    with Store(path) as store, pytest.warns(SkippedRunWarning, match="batch_size must be an integer"):
        assert {r.run_id for r in store.runs()} == {"0000000000a1", "0000000000b2"}
