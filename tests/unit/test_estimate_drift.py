"""Predicted ÷ measured over time, per machine: grouping, order, recorded and recomputed predictions."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from estimate_factories import cpu_calibration
from factories import make_result, with_figures
from flowrate.analysis.estimate_drift import NO_ESTIMATE, RECORDED, drift
from flowrate.cli.estimate_text import check_summary
from flowrate.config import RunConfig
from flowrate.estimate.calibration import save_calibration
from flowrate.estimate.check import check_estimates
from flowrate.estimate.cost import estimate_step
from flowrate.estimate.devices import device_model
from flowrate.estimate.report import COST_MODEL, trace_for
from flowrate.estimate.reprice import recompute_with_calibration
from flowrate.problems.registry import get_problem
from flowrate.results.schema import Result
from flowrate.results.sections import Estimate, Fidelity, Kind
from flowrate.results.store import Store, StoredRun


def _run(measured: float, predicted: float | None, when: str, host: str = "a", **kw: Any) -> Result:
    result = make_result(measured, created_at=when, environment={"hostname": host}, **kw)
    estimate = Estimate(samples_per_sec=predicted, cost_model="roofline-2") if predicted else None
    return with_figures(result, estimate=estimate)


def _stored(*results: Result) -> list[StoredRun]:
    return [StoredRun.from_result(r) for r in results]


def test_ratios_are_grouped_by_machine_and_ordered_by_time() -> None:
    runs = _stored(
        _run(100.0, 120.0, "2026-11-22T10:00:00+00:00"),
        _run(200.0, 150.0, "2026-11-20T10:00:00+00:00", host="b"),
        _run(100.0, 90.0, "2026-11-21T10:00:00+00:00"),
        _run(100.0, None, "2026-11-23T10:00:00+00:00"),
    )
    groups = drift(runs)
    assert [g.machine["hostname"] for g in groups] == ["b", "a"]  # by each machine's first run
    b, a = groups
    assert b.ratios == [pytest.approx(0.75)]
    assert a.ratios == [pytest.approx(0.9), pytest.approx(1.2)]  # oldest first; the last has none
    assert [p.created_at[:10] for p in a.points] == ["2026-11-21", "2026-11-22", "2026-11-23"]
    assert a.points[0].source == RECORDED and a.points[0].cost_model == "roofline-2"
    assert a.points[2].ratio is None and "no estimate recorded" in a.points[2].source
    assert (
        a.summary()
        == "2 of 3 run(s) with a prediction: median ratio 1.05, first 0.90, last 1.20, 2 within ±30%"
    )
    assert a.label == "a: Test CPU (Test CPU, 2 threads)"


def test_a_run_without_a_prediction_is_priced_with_its_machine_s_calibration() -> None:
    calibration = cpu_calibration()
    save_calibration(calibration)
    fp = calibration.fingerprint
    here = {
        "hostname": fp["hostname"],
        "device": {"type": "cpu", "name": fp["device_name"]},
        "cpu": {"model": fp["cpu_model"], "logical_cores": 2},
        "torch": {"version": torch.__version__, "cuda": None, "num_threads": fp["num_threads"]},
    }
    ours = make_result(1000.0, batch_size=8, environment=here, created_at="2026-11-21T10:00:00+00:00")
    other = make_result(
        1000.0, batch_size=8, environment={"hostname": "elsewhere"}, created_at="2026-11-22T10:00:00+00:00"
    )
    (mine,), (theirs,) = (g.points for g in drift(_stored(ours, other), recompute_with_calibration()))

    problem = get_problem("fc_mnist", "debug")
    config = RunConfig.from_dict(ours.config.to_dict()).for_problem(
        problem.modes, problem.default_mode, problem.name
    )
    model = device_model(calibration.device, None, calibration, None)
    expected = estimate_step(trace_for(config, problem, 8), model).samples_per_sec
    assert mine.predicted == pytest.approx(expected, rel=1e-12), mine.source
    assert mine.ratio == pytest.approx(expected / 1000.0, rel=1e-12)
    assert mine.source == f"recomputed with the calibration of {calibration.device} (2026-11-21)"
    assert mine.cost_model == COST_MODEL and theirs.cost_model is None
    assert theirs.predicted is None and "no calibration of Test CPU from that machine" in theirs.source

    # a `flowrate check` and a run that recorded why it has no estimate are not priced afterwards
    check = with_figures(ours, fidelity=Fidelity(final_loss=0.1), kind=Kind.CHECK)
    why = "data-parallel runs are not estimated"
    ddp = with_figures(ours, estimate=Estimate(reason=why))
    (group,) = drift(_stored(check, ddp), recompute_with_calibration())
    assert [p.predicted for p in group.points] == [None, None]
    assert [p.source for p in group.points] == ["no estimate recorded (an older run, or a check)", why]


def test_check_prints_the_ratios_per_machine_over_time(run_cli) -> None:  # type: ignore[no-untyped-def]
    with Store() as store:
        store.add(_run(100.0, 130.0, "2026-11-21T10:00:00+00:00"), ("d",))
        store.add(_run(100.0, 80.0, "2026-11-22T10:00:00+00:00"), ("d",))
    out = run_cli("estimate", "--check", "--tag", "d", "--json")
    assert out.code == 0, out.stderr
    (machine,) = out.json()["machines"]
    assert machine["machine"]["hostname"] == "a"
    assert [r["ratio"] for r in machine["runs"]] == [pytest.approx(1.3), pytest.approx(0.8)]
    text = run_cli("estimate", "--check", "--tag", "d")
    assert text.code == 0, text.stderr
    assert "predicted ÷ measured over time on a: Test CPU" in " ".join(text.stdout.split())
    assert "median ratio 1.05, first 1.30, last 0.80" in " ".join(text.stderr.split())


def test_the_check_sets_each_runs_prediction_beside_its_measurement_and_says_why_it_has_none() -> None:
    why = "data-parallel runs are not estimated"
    runs = _stored(
        _run(100.0, 110.0, "2026-11-21T10:00:00+00:00"),
        _run(200.0, 160.0, "2026-11-20T10:00:00+00:00", host="b"),
        with_figures(_run(100.0, None, "2026-11-22T10:00:00+00:00"), estimate=Estimate(reason=why)),
        _run(100.0, None, "2026-11-23T10:00:00+00:00"),
    )
    checked = check_estimates(runs)
    assert [c.ratio for c in checked.runs] == [pytest.approx(1.1), pytest.approx(0.8), None, None]
    assert [c.reason for c in checked.runs] == [None, None, why, NO_ESTIMATE]
    assert [c.device for c in checked.runs] == ["Test CPU"] * 4
    assert [g.machine["hostname"] for g in checked.machines] == ["b", "a"]
    assert check_summary(checked.runs) == [
        "2 run(s) with an estimate: median |error| 15%, median ratio 0.95 (predicted / measured), "
        "2 of 2 within ±30%",
        f"1 run(s) without an estimate: {why}",
        f"1 run(s) without an estimate: {NO_ESTIMATE}",
    ]
