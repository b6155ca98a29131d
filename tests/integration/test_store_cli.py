"""The store from the command line: runs are recorded, listed, shown, exported and imported; two
processes write at once without losing a row; a damaged store stops a run before it starts."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import FAST
from factories import make_result
from flowrate.results.store import Store

TINY = ("-p", "fc_mnist", "--size", "debug", *FAST, "--quiet")


def test_every_run_is_recorded_with_its_tags_and_shown_again(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("run", *TINY, "-b", "4", "--tag", "first", "-t", "cpu", "--json")
    assert outcome.code == 0, outcome.stderr
    printed = outcome.json()
    with Store(results_store, create=False) as store:
        [run] = store.runs()
    assert run.run_id == printed["run_id"]
    assert run.tags == ("cpu", "first")
    assert run.result.to_dict() == printed  # the store holds exactly what was printed

    listed = run_cli("runs")
    assert listed.code == 0
    assert run.run_id in listed.stdout and "fc_mnist/debug" in listed.stdout and "cpu, first" in listed.stdout

    shown = run_cli("show", run.run_id[:6])
    assert shown.code == 0
    assert (
        f"flowrate run {run.run_id}" in shown.stdout and "tags cpu, first" in shown.stdout
    )  # inspection output
    assert json.loads(run_cli("show", run.run_id, "--json").stdout) == printed


def test_no_store_records_nothing(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    assert run_cli("run", *TINY, "--no-store").code == 0
    assert not results_store.exists()
    refused = run_cli("run", *TINY, "--no-store", "--tag", "x")
    assert refused.code == 2 and "--no-store: cannot be combined with --store or --tag" in refused.stderr


def test_a_check_is_recorded_with_its_fidelity(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli(
        "check", "-p", "fc_mnist", "--size", "debug", "--steps", "30", "--lr", "1e-3", "--quiet"
    )
    assert outcome.code == 0, outcome.stderr
    with Store(results_store, create=False) as store:
        [run] = store.runs()
    assert run.final_loss is not None and run.final_loss == run.result.fidelity.final_loss  # type: ignore[index]


def test_a_damaged_store_stops_the_run_before_it_starts_and_is_left_alone(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "broken.db"
    store.write_bytes(b"garbage" * 500)
    out = tmp_path / "result.json"
    outcome = run_cli("run", *TINY, "--store", str(store), "--out", str(out))
    assert outcome.code == 2  # bad input: a --store that cannot be used
    assert "is not a flowrate results store" in outcome.stderr and "Traceback" not in outcome.stderr
    assert len(outcome.stderr.strip().splitlines()) == 1
    assert store.read_bytes() == b"garbage" * 500
    assert not out.exists()  # refused before any time was spent measuring


def test_filters_from_the_command_line(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    with Store(results_store) as store:
        store.add(make_result(precision="bf16", run_id="bf16bf16bf16"), ["mixed"])
        store.add(make_result(precision="fp32", run_id="f32f32f32f32"), [])
    listed = run_cli("runs", "--precision", "bf16")
    assert "bf16bf16bf16" in listed.stdout and "f32f32f32f32" not in listed.stdout
    assert "mixed" in run_cli("runs", "--tags").stdout
    data = json.loads(run_cli("runs", "--tag", "mixed", "--json").stdout)
    assert [d["run_id"] for d in data] == ["bf16bf16bf16"]
    bad = run_cli("runs", "--since", "last tuesday")
    assert bad.code == 2 and "--since: cannot read 'last tuesday' as a date" in bad.stderr  # bad input


def test_export_and_import_round_trip_runs_and_tags(run_cli, results_store: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    originals = [
        make_result(samples_per_sec=100.0, samples_per_joule=2.0, run_id="aaaa00000001"),
        make_result(samples_per_sec=200.0, final_loss=0.5, run_id="aaaa00000002"),
    ]
    with Store(results_store) as store:
        store.add(originals[0], ["x", "y"])
        store.add(originals[1], ["y"])
    exported = tmp_path / "runs.jsonl"
    assert run_cli("export", "--out", str(exported)).code == 0
    assert len(exported.read_text().splitlines()) == 2

    other = tmp_path / "other.db"
    imported = run_cli("import", str(exported), "--store", str(other), "--tag", "imported")
    assert imported.code == 0 and "2 runs imported" in imported.stderr
    with Store(other, create=False) as store:
        back = {r.run_id: r for r in store.runs()}
    for original in originals:
        assert back[original.run_id].result == original
    assert back["aaaa00000001"].tags == ("imported", "x", "y")
    again = run_cli("import", str(exported), "--store", str(other))
    assert "0 runs imported into" in again.stderr and "; 2 runs were there already" in again.stderr

    sheet = run_cli("export", "--format", "csv", "y")
    rows = list(csv.DictReader(io.StringIO(sheet.stdout)))
    assert {r["run_id"]: float(r["samples_per_sec"]) for r in rows} == {
        "aaaa00000001": 100.0,
        "aaaa00000002": 200.0,
    }
    assert {r["run_id"]: r["samples_per_joule"] for r in rows} == {"aaaa00000001": "2.0", "aaaa00000002": ""}


def test_a_result_file_imports_and_a_bad_line_imports_nothing(
    run_cli, results_store: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    single = tmp_path / "one.json"
    make_result(run_id="cccc00000001").save(single)
    assert run_cli("import", str(single)).code == 0

    broken = tmp_path / "broken.jsonl"
    good = make_result(run_id="cccc00000002").to_json(indent=None)
    broken.write_text(good + "\n{not json\n")
    outcome = run_cli("import", str(broken))
    assert outcome.code == 2 and "broken.jsonl line 2 is not JSON" in outcome.stderr
    with Store(results_store, create=False) as store:
        assert [r.run_id for r in store.runs()] == ["cccc00000001"]


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[4])
    from factories import make_result
    from flowrate.results.store import Store

    store, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    go = Path(store + ".go")
    while not go.exists():
        time.sleep(0.005)
    with Store(store) as opened:
        for i in range(count):
            opened.add(make_result(run_id=f"{name}{i:08d}"), [name])
    """
)


def test_two_processes_writing_at_once_lose_no_row(tmp_path: Path) -> None:
    store = tmp_path / "shared.db"
    count = 60
    tests_dir = str(Path(__file__).resolve().parents[1])
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store), name, str(count), tests_dir],
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("aaaa", "bbbb")
    ]
    Path(f"{store}.go").touch()  # both start writing together
    for writer in writers:
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
    with Store(store, create=False) as opened:
        runs = opened.runs()
        assert len(runs) == 2 * count
        assert opened.all_tags() == {"aaaa": count, "bbbb": count}


@pytest.mark.parametrize("command", ["runs", "show", "export"])
def test_reading_commands_never_create_a_store(run_cli, results_store: Path, command: str) -> None:  # type: ignore[no-untyped-def]
    args = [command, "abcd"] if command == "show" else [command]
    outcome = run_cli(*args)
    assert outcome.code == 2 and "no results store at" in outcome.stderr
    assert not results_store.exists()


# --- hostile records and outputs (issue 14: items 1, 2, 3, 13) ----------------------------------


def test_importing_a_record_with_a_string_for_a_number_imports_nothing(
    run_cli, results_store: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    with Store(results_store) as store:
        store.add(make_result(run_id="0123456789ab"))
    before = results_store.read_bytes()
    good = make_result(run_id="cccc00000003").to_dict()
    for field, value, shown in [
        ("samples_per_sec", "fast", "'fast'"),
        ("samples_per_sec", float("nan"), "nan"),
        ("cv", float("inf"), "inf"),
    ]:
        bad = make_result(run_id="cccc00000004").to_dict()
        bad["summary"][field] = value
        file = tmp_path / "bad.jsonl"
        file.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
        outcome = run_cli("import", str(file))
        assert outcome.code == 2, outcome.stderr
        [line] = outcome.stderr.strip().splitlines()
        assert line.startswith("error: ") and f"bad.jsonl line 2: summary.{field} must be " in line
        assert "a finite number" in line
        assert line.endswith(f"not {shown}; nothing was imported")
        assert results_store.read_bytes() == before
    bad = make_result(run_id="cccc00000005").to_dict() | {"run_id": "../../etc/passwd", "batch_size": -4}
    (tmp_path / "one.json").write_text(json.dumps(bad))
    refused = run_cli("import", str(tmp_path / "one.json"))
    assert refused.code == 2 and "batch_size must be an integer >= 1, not -4" in refused.stderr
    assert results_store.read_bytes() == before


def test_reading_commands_skip_a_damaged_run_and_show_the_rest(
    run_cli, results_store: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    import re
    import sqlite3

    good = make_result(run_id="0123456789ab", samples_per_sec=500.0)
    with Store(results_store) as store:
        store.add(good, ["t"])
    damaged = make_result(run_id="fa57fa57fa57").to_dict()
    damaged["summary"]["samples_per_sec"] = "fast"
    db = sqlite3.connect(results_store)  # as an older flowrate, which accepted it, stored it
    db.execute(
        "INSERT INTO runs (run_id, created_at, problem, samples_per_sec, result_json) VALUES (?, ?, ?, ?, ?)",
        ("fa57fa57fa57", "2026-11-23T00:00:00+00:00", "fc_mnist", float("inf"), json.dumps(damaged)),
    )
    db.execute("INSERT INTO tags VALUES ('fa57fa57fa57', 't')")
    db.commit()
    db.close()
    skipped = re.compile(
        r"warning: run 'fa57fa57fa57' in .* is skipped: its samples_per_sec column holds inf"
    )

    def one_warning(stderr: str) -> None:  # the CLI says it in one line, once, never as Python's two
        assert [line for line in stderr.splitlines() if "fa57fa57fa57" in line] == [
            line for line in stderr.splitlines() if skipped.fullmatch(line)
        ], stderr
        assert len(re.findall("fa57fa57fa57", stderr)) == 1 and "SkippedRunWarning" not in stderr, stderr

    for args in (["runs"], ["runs", "--json"], ["export"], ["export", "t"], ["pareto"]):
        outcome = run_cli(*args)
        assert outcome.code == 0, (args, outcome.stderr)
        one_warning(outcome.stderr)
        assert "Infinity" not in outcome.stdout and "NaN" not in outcome.stdout
    assert run_cli("show", good.run_id).code == 0  # reads that run alone
    listing = run_cli("runs", "--json")
    one_warning(listing.stderr)
    assert [r["run_id"] for r in json.loads(listing.stdout)] == [good.run_id]
    report = tmp_path / "report.html"
    reported = run_cli("report", "--out", str(report))
    assert reported.code == 0
    one_warning(reported.stderr)
    assert good.run_id in report.read_text() and "fa57fa57fa57" not in report.read_text()
    shown = run_cli("show", "fa57fa57fa57")
    assert shown.code == 2 and "run fa57fa57fa57 in" in shown.stderr and "cannot be read" in shown.stderr
    assert any(skipped.fullmatch(line) for line in shown.stderr.splitlines()), shown.stderr


def test_an_empty_tag_filter_is_refused_not_ignored(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    with Store(results_store) as store:
        store.add(make_result(), ["t"])
    outcome = run_cli("runs", "--tag", "")
    assert outcome.code == 2 and "--tag: must not be empty" in outcome.stderr


def test_import_refuses_a_tag_that_is_not_one_short_line(
    run_cli, results_store: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    file = tmp_path / "one.json"
    make_result(run_id="cccc00000006").save(file)
    outcome = run_cli("import", str(file), "--tag", "two\nlines")
    assert outcome.code == 2 and "--tag: tag 'two\\nlines' holds a control character" in outcome.stderr
    lines = tmp_path / "runs.jsonl"
    lines.write_text(json.dumps(make_result(run_id="cccc00000007").to_dict() | {"tags": ["x" * 500]}) + "\n")
    refused = run_cli("import", str(lines))
    assert (
        refused.code == 2 and "runs.jsonl: tag 'xxx" in refused.stderr and "500 characters" in refused.stderr
    )
    if results_store.exists():  # the --tag case may have created it, empty, before refusing
        with Store(results_store, create=False) as store:
            assert store.runs() == []


def test_export_writes_through_a_symlink_and_never_replaces_a_device(
    run_cli, results_store: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    with Store(results_store) as store:
        store.add(make_result(run_id="0123456789ab"))
    target = tmp_path / "run-42.jsonl"
    target.write_text("old\n")
    link = tmp_path / "latest.jsonl"
    link.symlink_to(target.name)
    assert run_cli("export", "--out", str(link)).code == 0
    assert link.is_symlink() and json.loads(target.read_text())["run_id"] == "0123456789ab"
    assert run_cli("export", "--out", "/dev/null").code == 0
    assert Path("/dev/null").is_char_device()
    if Path("/dev/full").exists():
        full = run_cli("export", "--out", "/dev/full")
        assert (
            full.code == 1 and full.stderr.strip() == "error: cannot write /dev/full: No space left on device"
        )
        assert Path("/dev/full").is_char_device()


def test_show_reads_a_json_file_but_never_a_path_given_as_a_run(
    run_cli, results_store: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    with Store(results_store) as store:
        store.add(make_result(run_id="0123456789ab"))
    saved = tmp_path / "run.json"
    make_result(run_id="cccc00000008").save(saved)
    shown = run_cli("show", str(saved))
    assert "flowrate run cccc00000008" in shown.stdout + shown.stderr
    for ref in ("../../etc/passwd", "/etc/passwd"):
        outcome = run_cli("show", ref)
        [line] = outcome.stderr.strip().splitlines()
        assert outcome.code == 2 and line.startswith(f"error: {ref!r} is no result file")
        assert "root:" not in outcome.stdout + outcome.stderr
