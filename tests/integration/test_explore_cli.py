"""`flowrate explore` end to end: real points in real processes, recorded as tagged runs; the same
exploration again resumes without running a recorded point; bad input is one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from flowrate.results.store import Store
from flowrate.results.store_filter import RunFilter

TINY = ("-p", "fc_mnist", "--size", "debug", "--device", "cpu", "--preheat", "1", "--duration", "0.2")
SPACE = ("--space", "batch_size=2..16:log2", "--space", "precision=fp32,bf16")
STEPS = ("-p", "fc_mnist", "--size", "debug", "--device", "cpu", "--steps", "2", "--preheat", "1", "-q")


@pytest.mark.slow
def test_explore_records_tagged_runs_prints_a_frontier_and_resumes(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    first = run_cli("explore", *TINY, *SPACE, "--budget", "4", "--initial", "4", "--json", "-q")
    assert first.code == 0, first.stderr
    document = json.loads(first.stdout)
    study = document["study"]
    assert document["runs"] == 4 and len(document["evaluations"]) == 4 and document["frontier"]
    with Store(results_store, create=False) as store:
        runs = store.runs(RunFilter(tag=f"explore:{study}"))
    assert len(runs) == 4 and all(set(r.tags) == {f"explore:{study}", "rung:0"} for r in runs)
    assert {e["run_id"] for e in document["evaluations"]} == {r.run_id for r in runs}
    assert {r.run_id for r in runs} >= {e["run_id"] for e in document["frontier"]}
    assert results_store.with_name("flowrate.explore.db").exists()  # the study, beside the store

    again = run_cli("explore", *TINY, *SPACE, "--budget", "5", "--initial", "4")
    assert again.code == 0, again.stderr
    assert "resuming: 4 evaluations recorded" in again.stderr
    assert again.stderr.count("rung 0 (0.2 s)") == 1  # one new point, the earlier four not rerun
    with Store(results_store, create=False) as store:
        runs = store.runs(RunFilter(tag=f"explore:{study}"))
    assert len(runs) == 5 and len({(r.batch_size, r.precision) for r in runs}) == 5
    listed = run_cli("runs", "--tag", f"explore:{study}")
    assert listed.code == 0 and all(r.run_id in listed.stdout for r in runs)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "the search space is empty"),
        (("--space", "batch_size=8..2"), "low end is above its high end"),
        (
            ("--space", "batch_size=2..8", "--batch-size", "4"),
            "both a flag (--batch-size) and a --space axis",
        ),
        (("--space", "batch_size=2..8", "--objective", "speed"), "unknown metric 'speed'"),
        (("--space", "batch_size=2..8", "--constraint", "power<3"), "unknown metric 'power'"),
        (("--space", "batch_size=2..8", "--budget", "2", "--initial", "3"), "less than the initial design"),
        (("--space", "precision=fp32,fp8"), "fp8"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_any_run(run_cli, results_store: Path, args, says) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("explore", *TINY, *args)
    assert outcome.code == 2, outcome.stderr
    assert says in outcome.stderr and len(outcome.stderr.strip().splitlines()) == 1
    assert "Traceback" not in outcome.stderr
    assert not results_store.exists()  # nothing ran, nothing was recorded


def test_fidelity_on_a_problem_check_cannot_train_is_refused(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    args = ("-p", "gemm", "--device", "cpu", "--space", "batch_size=1,2", "--objective", "final_loss")
    outcome = run_cli("explore", *args)
    assert outcome.code == 2, outcome.stderr
    assert "forward-only" in outcome.stderr and len(outcome.stderr.strip().splitlines()) == 1
    assert "Traceback" not in outcome.stderr
    assert not results_store.exists()  # nothing ran, nothing was recorded


@pytest.mark.slow
def test_short_rungs_run_fewer_steps_and_the_front_goes_on(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    base = ("-p", "fc_mnist", "--size", "debug", "--device", "cpu", "--preheat", "1", "--min-steps", "6")
    rungs = ("--duration", "0.6", "--min-duration", "0.2")
    done = run_cli("explore", *base, *rungs, *SPACE, "--budget", "5", "--initial", "2", "--json", "-q")
    assert done.code == 0, done.stderr
    report = json.loads(done.stdout)
    with Store(results_store, create=False) as store:
        runs = store.runs(RunFilter(tag=f"explore:{report['study']}"))
        results = {r.run_id: store.get(r.run_id).result for r in runs}
    by_rung = {rung: [r for r in runs if f"rung:{rung}" in r.tags] for rung in (0, 1)}
    # a rung a third of the duration long: measured at a third of the minimum steps (at least 2)
    for rung, duration, min_steps in ((0, 0.2, 2), (1, 0.6, 6)):
        configs = [results[r.run_id].config for r in by_rung[rung]]
        assert all(
            c["duration_s"] == pytest.approx(duration) and c["min_steps"] == min_steps for c in configs
        )
    short = {(r.batch_size, r.precision): results[r.run_id] for r in by_rung[0]}
    assert {(r.batch_size, r.precision) for r in by_rung[1]} <= set(short)  # only measured points go on
    # a point past the initial design went on in its own run: its short rung is that run's start;
    # the initial design's went on in runs of their own; five runs in all
    went_on = 0
    for run in by_rung[1]:
        full, first = results[run.run_id], short[(run.batch_size, run.precision)]
        went_on += full.intervals[: len(first.intervals)] == first.intervals
    assert len(by_rung[0]) + len(by_rung[1]) - went_on == 5 == report["runs"]


@pytest.mark.slow
def test_fidelity_is_an_objective_each_configuration_checked_once(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    objectives = ("--objective", "samples_per_sec:max", "--objective", "final_loss:min")
    space = ("--space", "precision=fp32,bf16")
    done = run_cli("explore", *TINY, *space, *objectives, "--budget", "2", "--initial", "2", "--json", "-q")
    assert done.code == 0, done.stderr
    document = json.loads(done.stdout)
    with Store(results_store, create=False) as store:
        runs = store.runs(RunFilter(tag=f"explore:{document['study']}"))
    checks = {r.precision: r for r in runs if "check" in r.tags}
    timed = {r.precision: r for r in runs if "rung:0" in r.tags}
    assert set(checks) == set(timed) == {"fp32", "bf16"} and len(runs) == 4
    for check in checks.values():  # `flowrate check`'s defaults: 300 steps, no preheat, the loss fell
        assert check.result.config.steps == 300 and check.result.config.preheat_steps == 0
        assert check.result.fidelity is not None and check.result.fidelity.fell
    for evaluation in document["evaluations"]:
        run = next(r for r in timed.values() if r.run_id == evaluation["run_id"])
        assert evaluation["values"]["final_loss"] == checks[run.precision].result.fidelity.final_loss


def _sessions_at_once(*argvs: tuple[str, ...]) -> list[tuple[int, str]]:
    """`flowrate explore ARGV` for each argv, in processes started together: each one's exit code
    and stderr."""
    started = [
        subprocess.Popen(
            [sys.executable, "-m", "flowrate", "explore", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv in argvs
    ]
    errors = [p.communicate(timeout=600)[1] for p in started]
    return [(p.returncode, stderr) for p, stderr in zip(started, errors, strict=True)]


@pytest.mark.slow
def test_two_sessions_of_one_study_started_together_keep_one_budget(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    args = (*STEPS, "--space", "batch_size=1..64:log2", "--initial", "1", "--name", "together")
    first = run_cli("explore", *args, "--budget", "1")
    assert first.code == 0, first.stderr
    outcomes = _sessions_at_once((*args, "--budget", "3"), (*args, "--budget", "3"))
    for code, stderr in outcomes:  # each ran, or was refused in one line while the other ran
        assert "Traceback" not in stderr and code in (0, 2), stderr
        if code == 2:
            assert len(stderr.strip().splitlines()) == 1 and "running in another session" in stderr
    assert 0 in [code for code, _ in outcomes]
    with Store(results_store, create=False) as store:
        runs = store.runs(RunFilter(tag="explore:together"))
    assert len(runs) == 3 and len({r.batch_size for r in runs}) == 3  # one budget, no point twice


@pytest.mark.slow
def test_two_studies_started_together_on_a_fresh_store_both_run(results_store: Path) -> None:
    args = (*STEPS, "--space", "batch_size=1,2", "--budget", "1", "--initial", "1")
    outcomes = _sessions_at_once((*args, "--name", "left"), (*args, "--name", "right"))
    assert [code for code, _ in outcomes] == [0, 0], outcomes
    assert not any("Traceback" in stderr for _, stderr in outcomes)
    with Store(results_store, create=False) as store:
        for name in ("left", "right"):
            assert len(store.runs(RunFilter(tag=f"explore:{name}"))) == 1
