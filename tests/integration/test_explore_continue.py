"""An exploration's rungs in one process (flowrate.campaigns.rungs.watch), really run: a run
that a rival beats at its first rung stops there; one nothing beats goes on to full length and
brings back a Result per rung, the lower ones a prefix of the whole; both through a fresh process
and through a cluster job's outcome file; the real evaluator records each rung as its own run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flowrate.campaigns.explore.evaluate import run_evaluator
from flowrate.campaigns.explore.objectives import parse_objectives
from flowrate.campaigns.explore.plan import DONE, Evaluation, ExploreSpec
from flowrate.campaigns.explore.space import Axis, SearchSpace
from flowrate.campaigns.process.child import run_in_fresh_process
from flowrate.campaigns.process.cluster import read_outcome, run_point
from flowrate.campaigns.process.executor import LocalExecutor
from flowrate.campaigns.process.job import Job, JobKind
from flowrate.campaigns.rungs.ladder import Continuation, Fidelity, Measured
from flowrate.campaigns.rungs.watch import RungWatch, plan_for
from flowrate.config import RunConfig
from flowrate.harness.api import run_config
from flowrate.results.store import Store
from flowrate.results.store_filter import RunFilter

OBJECTIVES = (("samples_per_sec", True), ("peak_memory_bytes", False))
BASE = RunConfig(problem="fc_mnist", size="debug", batch_size=4, duration_s=0.6, preheat_steps=2, min_steps=2)
UNBEATABLE = Measured("rival", (1e12, -1.0), (0.0, 0.0))  # a million times faster, in a byte


def _plan(*rivals: Measured) -> dict[str, object]:
    continuation = Continuation((0.2, 0.6), (tuple(rivals),), OBJECTIVES)
    return plan_for(continuation, [2])


def _elapsed(result: object) -> float:
    return result.intervals[-1].elapsed_s  # type: ignore[attr-defined]


def _ends_at_the_first_sample_point_past(result: object, duration_s: float) -> bool:
    """Whether the run's last sample point is the first at or past ``duration_s``: where a rung
    stops it, however long the machine took to get there (no bound on wall-clock time)."""
    ends = [i.elapsed_s for i in result.intervals]  # type: ignore[attr-defined]
    return ends[-1] >= duration_s and all(end < duration_s for end in ends[:-1])


def test_a_run_beaten_at_its_first_rung_stops_there() -> None:
    watch = RungWatch(_plan(UNBEATABLE))
    result = run_config(BASE, observer=watch)
    assert watch.stopped and len(watch.reached) == 1
    assert _ends_at_the_first_sample_point_past(result, 0.2)
    (own,) = watch.results(result)  # the run's own Result is the rung's, its duration the rung's
    assert own.run_id == result.run_id and own.config.duration_s == 0.2


def test_a_run_nothing_beats_goes_on_with_a_result_per_rung() -> None:
    watch = RungWatch(_plan())
    result = run_config(BASE, observer=watch)
    lower, final = watch.results(result)[0], watch.results(result)[1]
    assert not watch.stopped and final is result
    assert lower.config.duration_s == 0.2 and final.config.duration_s == 0.6
    assert _ends_at_the_first_sample_point_past(lower, 0.2) and _elapsed(final) >= 0.6
    # the lower rung's intervals are the first of the whole run's: one run, measured on its way
    assert lower.intervals == final.intervals[: len(lower.intervals)]
    assert lower.energy.joules is None and lower.memory.process_peak_rss_bytes > 0


def test_the_lower_rungs_come_back_from_a_fresh_process_and_a_cluster_job(tmp_path: Path) -> None:
    going = Job(BASE, JobKind.CONTINUE, json.dumps(_plan()))
    job = going.to_dict()
    assert job["rungs"] == _plan() and "plan" not in job["config"]
    child = run_in_fresh_process(going)
    assert child.result is not None and len(child.lower) == 1
    assert child.lower[0].config.duration_s == 0.2 and child.result.config.duration_s == 0.6
    out = tmp_path / "point.json"
    run_point(job, str(out), None)
    outcome = read_outcome(out)
    assert outcome.result is not None and [r.config.duration_s for r in outcome.lower] == [0.2]


@pytest.mark.parametrize("rivals", [(), (UNBEATABLE,)])
def test_the_real_evaluator_records_each_rung_reached_as_a_run(
    tmp_path: Path, rivals: tuple[Measured, ...]
) -> None:
    # a sample point every step: each rung is measured at its own point, so each adds timed seconds
    # (with the automatic cadence a loaded machine may put both rungs at one point, the second
    # then costing nothing)
    base = {"problem": "fc_mnist", "size": "debug", "preheat_steps": 2, "min_steps": 2, "sample_every": 1}
    space = SearchSpace(base, (Axis("batch_size", (4,), True, False),))
    objectives = parse_objectives(["samples_per_sec:max", "peak_memory_bytes:min"])
    spec = ExploreSpec(space, objectives, fidelity=Fidelity((0.2, 0.6)))
    store = Store(tmp_path / "runs.db")
    evaluate = run_evaluator(spec, LocalExecutor(), store)
    then = Continuation((0.2, 0.6), (rivals,), OBJECTIVES)
    (outcome,) = evaluate([Evaluation({"batch_size": 4}, 0.2, 0, then)])
    assert outcome.status == DONE and len(outcome.higher) == (0 if rivals else 1)
    recorded = [store.get(r.run_id).result for r in store.runs(RunFilter(tag=f"explore:{spec.study_name}"))]
    assert sorted(r.config.duration_s for r in recorded) == ([0.2] if rivals else [0.2, 0.6])
    assert all(o.cost_s > 0 for o in (outcome, *outcome.higher))
