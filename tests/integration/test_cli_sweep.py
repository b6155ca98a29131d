"""`flowrate sweep` end to end: real points in real processes, a real out-of-memory, and a sweep
killed mid-way (SIGKILL of its whole process group) that resumes without redoing a point."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil

from flowrate.results.store import Store
from flowrate.results.store_filter import RunFilter

TINY = ("-p", "fc_mnist", "--size", "debug", "--device", "cpu", "--preheat", "1", "--steps", "3")


def test_a_small_sweep_records_each_point_as_a_tagged_run(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("sweep", *TINY, "-g", "batch_size=2,4", "-t", "ci", "--quiet")
    assert outcome.code == 0, outcome.stderr
    assert outcome.stderr == ""  # quiet: the table alone, on stdout
    with Store(results_store, create=False) as store:
        [sweep] = store.sweeps()
        runs = store.runs(RunFilter(tag=f"sweep:{sweep['name']}"))
        points = store.sweep_points(sweep["sweep_id"])
    assert sweep["name"] == f"sweep-{sweep['sweep_id']}" and sweep["done"] == 2
    assert sorted(r.batch_size for r in runs) == [2, 4]
    assert all(set(r.tags) == {"ci", f"sweep:{sweep['name']}"} for r in runs)
    assert {p.run_id for p in points.values()} == {r.run_id for r in runs}
    # each in a process of its own, neither of them this one
    pids = {r.result.environment.process_id for r in runs}
    assert len(pids) == 2 and os.getpid() not in pids
    for run in runs:
        assert run.run_id in outcome.stdout


OOM_PROBLEM = """
import torch

from flowrate.problems.registry import get_problem


def make():
    problem = get_problem("fc_mnist", "debug")
    make_batch = problem.make_batch

    def too_big(batch_size, device, generator):
        if batch_size >= 4:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (a test)")
        return make_batch(batch_size, device, generator)

    problem.make_batch = too_big
    return problem
"""


def test_out_of_memory_in_a_real_process_skips_the_larger_batches(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "tight.py").write_text(OOM_PROBLEM)
    outcome = run_cli(
        "sweep", "-p", f"{tmp_path / 'tight.py'}:make", "--device", "cpu", "--preheat", "1", "--steps", "2",
        "-g", "batch_size=2..16", "--name", "tight",
    )  # fmt: skip
    assert outcome.code == 0, outcome.stderr  # out of memory is an outcome, not a failure
    assert "point 2/4 batch_size=4: failed: out of memory" in outcome.stderr
    assert (
        "point 3/4 batch_size=8: batch 8 skipped: batch 4 ran out of memory on this branch" in outcome.stderr
    )
    assert "point 4/4 batch_size=16: batch 16 skipped" in outcome.stderr
    with Store(create=False) as store:
        [sweep] = store.sweeps()
        points = sorted(store.sweep_points(sweep["sweep_id"]).values(), key=lambda p: p.params["batch_size"])
    assert [p.status for p in points] == ["done", "failed", "skipped", "skipped"]
    assert points[1].reason is not None and points[1].reason.startswith("out of memory at batch size 4")


def recorded_points(path: Path) -> dict[str, str | None]:
    """point key -> run id, read as another process would, while the sweep writes."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            return dict(db.execute("SELECT point_key, run_id FROM sweep_points").fetchall())
    except sqlite3.OperationalError:  # not created yet
        return {}


def live_members(group: int) -> list[psutil.Process]:
    members = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == group and process.status() != psutil.STATUS_ZOMBIE:
                members.append(process)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return members


def test_a_killed_sweep_resumes_without_redoing_recorded_points(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    args = ("sweep", *TINY, "-g", "batch_size=1..8", "--name", "killed")
    sweep = subprocess.Popen(
        [sys.executable, "-c", "from flowrate.cli.main import main; main()", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: the sweep and the point it is running
    )
    try:
        deadline = time.monotonic() + 90
        while not recorded_points(results_store):
            assert sweep.poll() is None, sweep.stderr.read().decode() if sweep.stderr else ""
            assert time.monotonic() < deadline, "no point was recorded in 90 s"
            time.sleep(0.1)
    finally:
        os.killpg(sweep.pid, signal.SIGKILL)
        sweep.wait()
        if sweep.stderr:
            sweep.stderr.close()
    deadline = time.monotonic() + 10
    while live_members(sweep.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not live_members(sweep.pid), "a process of the killed sweep lingers"
    before = recorded_points(results_store)
    assert 1 <= len(before) < 4

    outcome = run_cli(*args)
    assert outcome.code == 0, outcome.stderr
    assert (
        "resuming sweep killed" in outcome.stderr and f"{len(before)} of 4 points recorded" in outcome.stderr
    )
    after = recorded_points(results_store)
    assert len(after) == 4
    assert all(after[key] == run_id for key, run_id in before.items())  # not redone
    with Store(results_store, create=False) as store:
        runs = store.runs()
    assert sorted(r.run_id for r in runs) == sorted(after.values())  # each point ran exactly once
    assert sorted(r.batch_size for r in runs) == [1, 2, 4, 8]
    # this session ran only the points that were missing
    assert outcome.stderr.count("samples/s (run ") == 4 - len(before)


BROKEN_PROBLEM = """
import os
import signal

from flowrate.problems.registry import get_problem


def make():
    problem = get_problem("fc_mnist", "debug")
    make_batch = problem.make_batch

    def broken(batch_size, device, generator):
        if batch_size == 2:
            raise ValueError("a bug in the user's problem")
        if batch_size == 4:
            os.kill(os.getpid(), signal.SIGKILL)  # the process dies without a word
        return make_batch(batch_size, device, generator)

    problem.make_batch = broken
    return problem
"""


def test_a_crashed_point_is_recorded_failed_and_the_sweep_goes_on(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "broken.py").write_text(BROKEN_PROBLEM)
    outcome = run_cli(
        "sweep", "-p", f"{tmp_path / 'broken.py'}:make", "--device", "cpu", "--preheat", "0", "--steps", "1",
        "-g", "batch_size=2,4,8",
    )  # fmt: skip
    assert outcome.code == 1
    # an exception in the user's file is named by its file and line (issue 14)
    said = "broken() failed: ValueError: a bug in the user's problem (broken.py:"
    assert f"point 1/3 batch_size=2 failed: {said}" in outcome.stderr
    assert "point 2/3 batch_size=4 failed: crashed: its process died before reporting" in outcome.stderr
    assert "point 3/3 batch_size=8: " in outcome.stderr and "samples/s (run " in outcome.stderr
    assert "error: 2 of 3 points failed for another reason than memory: point(s) 1, 2" in outcome.stderr
    assert "Traceback" not in outcome.stderr
