"""A sweep of loads in one serve-bench command against tests/fault_server.py: each load a run of
its own in the store (a configuration of its own), the curve's table and figure, every load
checked before anything is sent, and one Ctrl-C stopping the whole sweep."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import fault_server
from flowrate.results.identity import workload
from flowrate.results.schema import Result
from flowrate.results.serving import Serving, SweepPlace
from flowrate.results.store import Store

LOAD = ("--model", "m", "-n", "4", "--input-len", "4", "--output-len", "3")


@pytest.fixture(scope="module", autouse=True)
def server() -> None:
    fault_server.start()


def _serving(result: Result) -> Serving:
    assert result.serving is not None
    return result.serving


def _sweep(section: Serving) -> SweepPlace:
    assert section.sweep is not None
    return section.sweep


def _runs(store: Path) -> list[Result]:
    with Store(store) as opened:
        return sorted((run.result for run in opened.runs()), key=lambda r: _sweep(_serving(r)).point or 0)


def test_a_rate_sweep_records_each_load_as_a_run_and_draws_its_curve(run_cli: Any, tmp_path: Path) -> None:
    store, plot = tmp_path / "s.db", tmp_path / "curve.png"
    args = ("--rate", "20,40", "--slo", "ttft_ms=60000", "--store", str(store), "--plot", str(plot))
    outcome = run_cli("serve-bench", "--url", fault_server.url("ok"), *LOAD, *args)
    assert outcome.code == 0, outcome.stderr
    runs = _runs(store)
    sections = [_serving(r) for r in runs]
    assert [(s.rate, s.concurrency, s.requests) for s in sections] == [
        (20.0, None, 4),
        (40.0, None, 4),
    ]
    assert [_sweep(s).point for s in sections] == [0, 1]
    assert {_sweep(s).id for s in sections} == {_sweep(sections[0]).id}
    assert _sweep(sections[0]).loads == ["20 req/s", "40 req/s"]
    assert all(_sweep(s).stopped == "every load" and _sweep(s).cut is None for s in sections)
    # 4 requests bound no p99: the verdict is the search's "undecided", its figures kept
    assert [_sweep(s).verdict for s in sections] == ["undecided", "undecided"]
    assert (_sweep(sections[0]).slo_latency_ms or {})["ttft_ms"].n == 4
    assert workload(runs[0]) != workload(runs[1])  # two configurations, by their load
    assert "point 1 of 2: 20 req/s" in outcome.stderr and "point 2 of 2: 40 req/s" in outcome.stderr
    assert "serve-bench sweep (every load)" in outcome.stderr
    table = outcome.stderr.split("serve-bench sweep (every load)")[1]
    for run in runs:
        assert f"recorded as run {run.run_id}" in outcome.stderr and run.run_id in table
    assert plot.stat().st_size > 0


def test_a_concurrency_sweep_runs_each_closed_loop_in_turn(run_cli: Any, tmp_path: Path) -> None:
    store = tmp_path / "c.db"
    outcome = run_cli(
        "serve-bench", "--url", fault_server.url("ok"), *LOAD, "--concurrency", "2,1", "--store", str(store)
    )
    assert outcome.code == 0, outcome.stderr
    sections = [_serving(r) for r in _runs(store)]
    assert [(s.rate, s.concurrency) for s in sections] == [(None, 2), (None, 1)]
    assert all(s.figures().completed == 4 for s in sections)


def test_a_sweep_of_conversations_and_a_point_that_fails(run_cli: Any, tmp_path: Path) -> None:
    """Each point sends every conversation (-n 2, 2 turns: 4 requests); a point with no request
    completed fails the command (exit 1) once every point is recorded."""
    store = tmp_path / "t.db"
    chat = ("--endpoint", "chat", "--turns", "2", "-n", "2", "--concurrency", "1,2", "--store", str(store))
    outcome = run_cli("serve-bench", "--url", fault_server.url("ok"), "--model", "m", *chat)
    assert outcome.code == 0, outcome.stderr
    sections = [_serving(r) for r in _runs(store)]
    assert [len(s.traces) for s in sections] == [4, 4] and [s.concurrency for s in sections] == [1, 2]
    assert all([t.turn for t in s.traces] == [0, 1, 0, 1] for s in sections)
    failing = tmp_path / "f.db"
    outcome = run_cli(
        "serve-bench", "--url", fault_server.url("500"), *LOAD, "--rate", "20,40", "--store", str(failing)
    )
    assert outcome.code == 1 and len(_runs(failing)) == 2, outcome.stderr
    assert "error: 20 req/s: no request completed (HTTP 500 x4)" in outcome.stderr
    assert "; 40 req/s: no request completed" in outcome.stderr


def test_a_budget_spent_before_the_first_load_sends_nothing(run_cli: Any) -> None:
    """--budget counts from the process's start: this test process started more than 1 s ago."""
    posts = fault_server.server().posts
    argv = ("--rate", "1,2", "--budget", "1s", "--no-store")
    outcome = run_cli("serve-bench", "--url", fault_server.url("ok"), *LOAD, *argv)
    assert (
        outcome.code == 1
        and "--budget was spent before the first load (budget); no load was sent" in outcome.stderr
    )
    assert fault_server.server().posts == posts + 37  # the prompt-length probes only: 1 + 2 × 18 words


@pytest.mark.parametrize(
    ("args", "flag", "says"),
    [
        (("--rate", "1,nan"), "--rate", "nan is not a rate"),
        (("--rate", "1,2,1"), "--rate", "1 is given twice"),
        (("--rate", "2,inf"), "--rate", "finite numbers above 0, not inf"),
        (("--rate", "2,-1"), "--rate", "-1"),
        (("--concurrency", "2,0"), "--concurrency", "0"),
        (("--concurrency", "4,4"), "--concurrency", "4 is given twice"),
        (("--rate", "1,2", "--out", "{tmp}/o.json"), "--out", "a run of its own"),
        (("--rate", "1,2", "--json"), "--json", "a run of its own"),
        (("--rate", "1,2", "--warmup", "2"), "--warmup", "not with a sweep"),
        (("--rate", "1,2", "--find-max-rate", "--slo", "ttft_ms=9"), "--find-max-rate", "not with a sweep"),
        (("--rate", "1,2", "--resolution", "0.1"), "--resolution", "only with --find-max-rate"),
    ],
)
def test_every_load_is_checked_before_anything_is_sent(
    run_cli: Any, tmp_path: Path, args: tuple[str, ...], flag: str, says: str
) -> None:
    posts = fault_server.server().posts
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    outcome = run_cli("serve-bench", "--url", fault_server.url("ok"), *LOAD, "--no-store", *argv)
    assert outcome.code == 2 and flag in outcome.stderr and says in outcome.stderr, outcome.stderr
    assert "Traceback" not in outcome.stderr and len(outcome.stderr.strip().splitlines()) == 1
    assert fault_server.server().posts == posts


def test_one_ctrl_c_stops_the_whole_sweep_and_keeps_the_points_measured(tmp_path: Path) -> None:
    """hold-after-4: the first load's 4 requests are answered, the second load's held."""
    held, store = fault_server.server().held, tmp_path / "cut.db"
    url = fault_server.url(f"hold-after-4-{uuid.uuid4().hex[:6]}")
    cli = subprocess.Popen(
        [sys.executable, "-m", "flowrate", "serve-bench", "--url", url, *LOAD, "--concurrency", "1,2,4",
         "--store", str(store)],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while fault_server.server().held < held + 2 and cli.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # until the second load's two streams are open and held
    cli.send_signal(signal.SIGINT)  # once
    _, stderr = cli.communicate(timeout=60)
    assert cli.returncode == 130, stderr
    assert "Traceback" not in stderr and "point 3 of 3" not in stderr
    first, cut = [_serving(r) for r in _runs(store)]
    assert first.concurrency == 1 and not first.partial and _sweep(first).cut is None
    assert first.figures().completed == 4
    assert cut.concurrency == 2 and cut.partial and _sweep(cut).cut == "interrupted"
    assert [t.error for t in cut.traces] == ["interrupted"] * 2
    assert _sweep(first).stopped == _sweep(cut).stopped == "interrupted"
