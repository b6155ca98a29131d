"""--repeat: fresh processes per run, combined across runs with exact statistics."""

import dataclasses
import os

import pytest
import scipy.stats

import flowrate
from flowrate.campaigns.repeat import combine
from flowrate.results.schema import Result

TINY = dict(size="debug", device="cpu", preheat_steps=1, steps=4, sample_every=2)


@pytest.fixture(scope="module")
def base() -> Result:
    return flowrate.benchmark("fc_mnist", **TINY)


def with_median(result: Result, median: float, run_id: str) -> Result:
    summary = dataclasses.replace(result.summary, median_samples_per_sec=median)
    return dataclasses.replace(result, summary=summary, run_id=run_id)


def test_combine_gives_across_run_statistics_of_the_per_run_medians(base: Result) -> None:
    runs = [with_median(base, m, f"r{m}") for m in (100.0, 102.0, 98.0)]
    combined = combine(runs)
    r = combined.repeat
    assert r is not None
    assert [run.median_samples_per_sec for run in r.runs] == [100.0, 102.0, 98.0]
    assert r.n == 3 and r.median_samples_per_sec == 100.0 and r.mean_samples_per_sec == 100.0
    assert r.stdev_samples_per_sec == pytest.approx(2.0)
    assert r.cv == pytest.approx(0.02)
    half = scipy.stats.t.ppf(0.975, 2) * 2.0 / 3**0.5
    assert r.ci95_low_samples_per_sec == pytest.approx(100.0 - half)
    assert r.ci95_high_samples_per_sec == pytest.approx(100.0 + half)
    assert r.disagree is False
    # the record's own figures are those of the median run
    assert combined.run_id == r.representative_run_id == "r100.0"
    assert not any("disagree" in w for w in combined.warnings)


def test_runs_that_disagree_are_flagged(base: Result) -> None:
    combined = combine([with_median(base, m, str(m)) for m in (100.0, 130.0)])
    assert combined.repeat is not None and combined.repeat.disagree is True
    assert any("2 runs disagree" in w for w in combined.warnings)


def test_cli_repeat_runs_each_benchmark_in_its_own_process(run_cli) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli(
        "run", "--problem", "fc_mnist", "--size", "debug", "--steps", "4", "--preheat", "1",
        "--device", "cpu", "--repeat", "2", "--json",
    )  # fmt: skip
    assert outcome.code == 0, outcome.stderr
    result = Result.from_json(outcome.stdout)
    assert result.repeat is not None and result.repeat.n == 2
    ids = [run.run_id for run in result.repeat.runs]
    assert len(set(ids)) == 2 and result.run_id in ids
    assert "run 1/2" in outcome.stderr and "run 2/2" in outcome.stderr
    # each run recorded the process that ran it: two distinct ones, neither of them this one
    pids = {run.process_id for run in result.repeat.runs}
    assert len(pids) == 2 and os.getpid() not in pids


def test_a_failing_run_says_which_one(run_cli) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("run", "--problem", "fc_mnist", "--size", "debug", "--device", "cpu", "--lr", "1e30",
                      "--steps", "3", "--preheat", "1", "--repeat", "2")  # fmt: skip
    assert outcome.code == 1
    assert "run 1 of 2 failed" in outcome.stderr and "Traceback" not in outcome.stderr


def test_ctrl_c_after_a_finished_run_keeps_it_as_an_interrupted_result(  # type: ignore[no-untyped-def]
    run_cli, base: Result, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """The second of three fresh processes is interrupted: the first run's figures are recorded
    (store and --out), marked as interrupted, and the command exits 130."""
    from flowrate.campaigns import repeat
    from flowrate.campaigns.process.child import ChildOutcome

    calls = []

    def fake_fresh_process(config, **_: object) -> ChildOutcome:  # type: ignore[no-untyped-def]
        calls.append(config)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return ChildOutcome(dataclasses.replace(base, run_id="first000run1"))

    monkeypatch.setattr(repeat, "run_in_fresh_process", fake_fresh_process)
    out, store = tmp_path / "cut.json", tmp_path / "s.db"
    outcome = run_cli(
        "run", "--problem", "fc_mnist", "--size", "debug", "--steps", "4", "--preheat", "1",
        "--repeat", "3", "--out", str(out), "--store", str(store),
    )  # fmt: skip
    assert outcome.code == 130 and "interrupted" in outcome.stderr
    assert len(calls) == 2
    kept = Result.load(out)
    assert kept.repeat is not None and kept.repeat.n == 1 and kept.run_id == "first000run1"
    assert "interrupted after 1 of 3 runs: the figures combine the 1 that finished" in kept.warnings
    assert run_cli("show", "first000run1", "--store", str(store)).code == 0
