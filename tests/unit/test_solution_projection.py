"""--to-solution in epochs of a --data set, and at N devices given a stored `flowrate scaling`
study: exact figures from fixed inputs, the study found in a real store, and the refusals."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from factories import make_result
from flowrate.campaigns.scaling.projection import Study, check_study, load_study, projected
from flowrate.cli.profile_text import solution_rows
from flowrate.config import RunConfig
from flowrate.errors import ConfigError
from flowrate.harness.api import priced
from flowrate.results.schema import Result
from flowrate.results.sections import Distributed, Input
from flowrate.results.solution import DeviceProjection, ScalingPointRef, at_devices, project
from flowrate.results.store import Store

POINTS = [ScalingPointRef(1, 1.0, "r1"), ScalingPointRef(2, 0.9, "r2"), ScalingPointRef(4, 0.5, "r4")]


def test_epochs_are_the_data_sets_samples_times_the_epochs() -> None:
    # 3 epochs of 1000 samples at 250 samples/s: 12 s; at 0.001 $/s 0.012 $
    solution = project(3.0, "epochs", 250.0, None, 0.001, samples_per_epoch=1000)
    assert (solution.seconds, solution.dollars, solution.rate_per_sec) == (12.0, pytest.approx(0.012), 250.0)
    assert solution.rests_on == (
        "GlobalRate 250 samples/s of this run's timed window, 1000 samples per epoch of the --data set, "
        "0.001 $/s at the given prices"
    )
    assert project(3.0, "epochs", 250.0, None, None).reason == (
        "--to-solution: epochs count the samples of a --data set, and this run read none"
    )


def test_a_run_on_a_data_set_projects_its_epochs() -> None:
    result = dataclasses.replace(make_result(samples_per_sec=200.0), input=Input(samples=500))
    run = priced(result, RunConfig(to_solution="4epochs", data_dir="some/data"))
    assert run.solution is not None
    assert (run.solution.seconds, run.solution.samples_per_epoch) == (10.0, 500)
    assert Result.from_json(run.to_json()).solution == run.solution


def test_epochs_without_a_data_set_are_refused() -> None:
    with pytest.raises(ConfigError) as refused:
        RunConfig(to_solution="3epochs")
    assert (refused.value.field, refused.value.message) == (
        "to_solution",
        "epochs count the samples of a --data set: give --data DIR, or tokens or samples",
    )


def test_at_n_devices_the_rate_scales_with_the_measured_efficiency_and_the_price_per_device() -> None:
    # 1e6 samples at 100 samples/s on 1 device: 1e4 s, 10 $ at 0.001 $/s. At 2 devices, 0.9
    # efficient: 180 samples/s, 5555.5 s at 0.002 $/s = 11.1 $; at 4 devices, 0.5: 200/s, 5000 s, 20 $
    solution = at_devices(project(1e6, "samples", 100.0, None, 0.001), "s1", POINTS, 1, 0.001)
    assert solution.devices == [
        DeviceProjection(1, 1.0, 100.0, 1e4, pytest.approx(10.0), "r1"),
        DeviceProjection(2, 0.9, 180.0, pytest.approx(1e6 / 180), pytest.approx(10 / 0.9), "r2"),
        DeviceProjection(4, 0.5, 200.0, 5000.0, pytest.approx(20.0), "r4"),
    ]
    assert solution.devices_rest_on == (
        "scaling study s1: efficiencies against its 1-device run, from runs r1, r2, r4; priced per device"
    )
    # this run on 2 devices (at 180 samples/s): 1 device is 180 / 2 / 0.9 = 100 samples/s
    from_two = at_devices(project(1e6, "samples", 180.0, None, None), "s1", POINTS, 2, None)
    assert [(p.devices, p.rate_per_sec, p.dollars) for p in from_two.devices] == [
        (1, pytest.approx(100.0), None),
        (2, pytest.approx(180.0), None),
        (4, pytest.approx(200.0), None),
    ]
    elsewhere = at_devices(project(1e6, "samples", 100.0, None, None), "s1", POINTS, 3, None)
    assert (elsewhere.devices, elsewhere.devices_reason) == (
        [],
        "--scaling s1: this run ran on 3 device(s), not one of the study's sizes (1, 2, 4)",
    )


def _study_runs(batch_size: int = 8) -> list[Result]:
    """A study of 1, 2 and 4 processes at 100, 180 and 200 samples/s (efficiency 1, 0.9, 0.5)."""
    runs = []
    for n, rate in ((1, 100.0), (2, 180.0), (4, 200.0)):
        made = make_result(samples_per_sec=rate, batch_size=batch_size * n, run_id=f"a{n}0000000")
        merged = Distributed(world_size=n, batch_size_per_rank=batch_size)
        runs.append(dataclasses.replace(made, distributed=merged))
    return runs


def test_a_run_is_projected_to_the_sizes_of_a_study_of_its_configuration() -> None:
    run = priced(make_result(samples_per_sec=100.0), RunConfig(to_solution="1e6samples", price_per_hour=3.6))
    study = Study("s1", tuple(_study_runs()))
    solution = projected(run, study).solution
    assert solution is not None
    assert [(p.devices, p.efficiency, p.seconds, p.run_id) for p in solution.devices] == [
        (1, 1.0, 1e4, "a10000000"),
        (2, 0.9, pytest.approx(1e6 / 180), "a20000000"),
        (4, 0.5, 5000.0, "a40000000"),
    ]
    assert solution_rows(solution)[1:] == [
        ("at N devices", "1 device: 2 h 46 min, 10 $ (efficiency 1)"),
        ("", "2 devices: 1 h 32 min, 11.11 $ (efficiency 0.9)"),
        ("", "4 devices: 1 h 23 min, 20 $ (efficiency 0.5)"),
        (
            "",
            "(at scaling study s1: efficiencies against its 1-device run, from runs a10000000, "
            "a20000000, a40000000; priced per device)",
        ),
    ]
    other = projected(run, Study("s2", tuple(_study_runs(batch_size=16))))
    assert other.solution is not None and other.solution.devices == []
    assert other.solution.devices_reason == (
        "--scaling s2: its run a10000000 measured batch per device 16, this run 8: no projection to its sizes"
    )


def test_a_study_is_found_by_its_name_or_one_of_its_runs_and_checked_before_the_run(tmp_path: Path) -> None:
    with Store(tmp_path / "runs.db") as store:
        for run in _study_runs():
            store.add(run, ("scaling:s1", f"nproc:{run.distributed.world_size if run.distributed else 1}"))
        store.add(make_result(run_id="ffff0000"))
        by_name = load_study(store, "s1")
        assert [r.run_id for r in by_name.runs] == ["a10000000", "a20000000", "a40000000"]
        assert load_study(store, "a200") == by_name
        with pytest.raises(ConfigError) as refused:
            load_study(store, "ffff0000")
    assert refused.value.message.startswith("'ffff0000' names no `flowrate scaling` study")
    check_study(by_name, RunConfig(problem="fc_mnist", precision="fp32"))
    with pytest.raises(ConfigError) as refused:
        check_study(by_name, RunConfig(problem="fc_mnist", precision="bf16"))
    assert refused.value.message == (
        "study s1 measured precision 'fp32', this run 'bf16': give the study of this configuration"
    )


def test_a_study_is_found_by_the_report_flowrate_scaling_printed(tmp_path: Path) -> None:
    from flowrate.campaigns.scaling.run import efficiency

    runs = _study_runs()
    report = efficiency([(n, r) for n, r in zip((1, 2, 4), runs, strict=True)], "s1", None)
    path = tmp_path / "scaling.json"
    path.write_text(json.dumps(report.to_dict()))
    with Store(tmp_path / "runs.db") as store:
        for run in runs[:2]:
            store.add(run)
        with pytest.raises(ConfigError) as refused:
            load_study(store, str(path))
        assert refused.value.message == f"{path}: its run a40000000 is not in {store.path}"
        store.add(runs[2])
        study = load_study(store, str(path))
    assert (study.name, [r.run_id for r in study.runs]) == ("s1", ["a10000000", "a20000000", "a40000000"])
    path.write_text("[]")
    with Store(tmp_path / "runs.db") as store, pytest.raises(ConfigError) as refused:
        load_study(store, str(path))
    assert refused.value.message == f"{path} is not a `flowrate scaling --json` report"
