"""The reference models' working-set factor: its formula, its curve over bytes per kernel, the
terms it scales, its round trip through the calibration file, and the references themselves
traced, priced and run."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from estimate_factories import OVERHEADS, TinyMLP, cpu_calibration
from flowrate.config import Mode, OptimizerName, Precision
from flowrate.estimate import calibrating
from flowrate.estimate import calibration as cal
from flowrate.estimate.calibrating import working_set_curve
from flowrate.estimate.cost import estimate_step
from flowrate.estimate.devices import device_model
from flowrate.estimate.probes import Timer
from flowrate.estimate.reference import (
    FRAMEWORK_TERMS,
    SIZES,
    ReferenceModel,
    bytes_per_kernel,
    reference_step,
    working_set_factor,
)
from flowrate.estimate.trace import trace_step

TERMS = {
    "compute": 1.0,
    "memory": 0.1,
    "optimizer": 0.2,
    "dispatch": 0.3,
    "autograd": 0.4,
    "modules": 0.1,
    "step": 0.2,
}


def test_the_factor_loads_the_whole_miss_on_the_framework_terms() -> None:
    # framework 1.0 s, the rest 1.3 s: a step measured at 3.3 s needs the framework twice as long
    assert working_set_factor(3.3, TERMS) == pytest.approx(2.0)
    assert working_set_factor(2.3, TERMS) == pytest.approx(1.0)


def test_a_reference_faster_than_priced_leaves_the_terms_as_measured() -> None:
    assert working_set_factor(1.5, TERMS) == 1.0  # (1.5 - 1.3) / 1.0 would be 0.2
    assert working_set_factor(9.0, {"compute": 1.0}) == 1.0  # no framework term to scale


def _device(factor: float):  # type: ignore[no-untyped-def]
    """A device whose working-set factor is ``factor`` at every working set."""
    overheads = dataclasses.replace(OVERHEADS, working_set=((1.0, factor), (2.0, factor)))
    calibration = dataclasses.replace(cpu_calibration(), overheads=overheads)
    return device_model(calibration.device, None, calibration, None)


def _device_without_curve():  # type: ignore[no-untyped-def]
    calibration = dataclasses.replace(cpu_calibration(), overheads=OVERHEADS)
    return device_model(calibration.device, None, calibration, None)


def test_the_factor_runs_linearly_in_log_bytes_between_the_references_and_flat_beyond() -> None:
    overheads = dataclasses.replace(OVERHEADS, working_set=((10e3, 1.2), (1000e3, 2.0)))
    assert overheads.factor_at(1e3) == 1.2  # below the small reference: its factor
    assert overheads.factor_at(10e3) == pytest.approx(1.2)
    assert overheads.factor_at(100e3) == pytest.approx(1.6)  # half way in log bytes
    assert overheads.factor_at(1000e3) == pytest.approx(2.0)
    assert overheads.factor_at(1e9) == 2.0  # beyond the large one: its factor
    assert OVERHEADS.factor_at(100e3) == 1.0  # a calibration without the references
    scaled = overheads.at_working_set(100e3)
    assert scaled.autograd_node_s == pytest.approx(1.6 * OVERHEADS.autograd_node_s)
    assert scaled.optimizer == OVERHEADS.optimizer


@pytest.mark.parametrize("mode", [Mode.TRAIN, Mode.INFER])
def test_the_factor_scales_dispatch_autograd_modules_and_step_and_nothing_else(mode: Mode) -> None:
    trace = trace_step(
        TinyMLP(), mode=mode, precision=Precision.FP32, optimizer=OptimizerName.ADAMW, batch_size=2
    )
    plain, scaled = estimate_step(trace, _device(1.0)).terms, estimate_step(trace, _device(2.5)).terms
    assert set(plain) == set(scaled)
    for name, seconds in plain.items():
        expected = seconds * 2.5 if name in FRAMEWORK_TERMS else seconds
        assert scaled[name] == pytest.approx(expected), name
    assert "optimizer" in plain if mode is Mode.TRAIN else "autograd" not in plain


def test_the_factor_is_shown_in_the_basis_and_round_trips_through_the_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    curve = dataclasses.replace(OVERHEADS, working_set=((25e3, 1.1), (274e3, 1.75)))
    saved = dataclasses.replace(cpu_calibration(), overheads=curve)
    basis = device_model(saved.device, None, saved, None).basis
    assert basis.endswith("x1.1 at 25 KB to x1.8 at 274 KB per kernel")
    assert "per kernel" not in _device_without_curve().basis
    path = tmp_path / "calibration.json"
    cal.save_calibration(saved, path)
    assert cal.load_calibrations(path)[saved.device] == saved
    # a file written before the references existed loads without a curve: 1 at every working set
    data = json.loads(path.read_text())
    del data["devices"][saved.device]["overheads"]["working_set"]
    path.write_text(json.dumps(data))
    assert cal.load_calibrations(path)[saved.device].overheads == OVERHEADS


class _Timings(Timer):
    """The calls take the given seconds, one after another."""

    def __init__(self, seconds: list[float]) -> None:
        super().__init__(sync=lambda: None, budget=0.0)
        self.left = list(seconds)

    def seconds(self, call):  # type: ignore[no-untyped-def]
        call()  # the reference's step really runs
        return self.left.pop(0)


def test_each_reference_training_step_is_priced_and_its_measured_time_sets_its_point() -> None:
    calibration = dataclasses.replace(cpu_calibration(), overheads=OVERHEADS)
    device = device_model(calibration.device, None, calibration, None)
    expected, measured = [], []
    for problem, factor in zip(SIZES, (1.2, 1.6), strict=True):
        trace = trace_step(
            problem, mode=Mode.TRAIN, precision=Precision.FP32, optimizer=OptimizerName.ADAMW, batch_size=4
        )
        terms = estimate_step(trace, device).terms
        framework = sum(terms[name] for name in FRAMEWORK_TERMS)
        rest = sum(seconds for name, seconds in terms.items() if name not in FRAMEWORK_TERMS)
        measured.append(rest + factor * framework)
        expected.append((bytes_per_kernel(trace), factor))
    curve = working_set_curve(calibration, measured)
    flat = [value for point in curve for value in point]
    assert flat == pytest.approx([value for point in sorted(expected) for value in point])
    small, large = curve
    assert small[0] < 32e3 and large[0] > 256e3  # one reference in a core's L2, one beyond it


@pytest.mark.parametrize("problem", SIZES, ids=lambda p: f"width{p.width}")
def test_a_reference_is_two_blocks_whose_parameters_it_counts_and_its_step_runs(
    problem: ReferenceModel,
) -> None:
    model = problem.build_model()
    assert problem.parameter_count() == sum(p.numel() for p in model.parameters())
    assert len(problem.blocks(model)) == ReferenceModel.layers
    reference_step(problem, torch.device("cpu"))()


def test_calibrate_records_how_far_the_machine_moved_between_its_start_and_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rates = dataclasses.replace(cpu_calibration(), overheads=OVERHEADS)
    monkeypatch.setattr(calibrating, "measure_rates", lambda device, **_: rates)
    # the larger reference at the start, then the two for the curve: the larger's is the end
    timings = _Timings([2.0e-3, 1.0e-3, 3.2e-3])
    monkeypatch.setattr(calibrating, "Timer", lambda *args, **kwargs: timings)
    # calibrate() keeps freed memory for good: not in the test process, where later runs release it
    monkeypatch.setattr(calibrating.freed_memory, "apply", lambda setting: None)
    measured = calibrating.calibrate(torch.device("cpu"))
    assert measured.speed_moved == pytest.approx(1.6) and timings.left == []
    assert measured.overheads is not None and len(measured.overheads.working_set) == 2
    path = cal.calibration_path()
    cal.save_calibration(measured, path)
    assert cal.load_calibrations(path)[measured.device].speed_moved == pytest.approx(1.6)
    data = json.loads(path.read_text())
    del data["devices"][measured.device]["speed_moved"]  # a file from before the check
    path.write_text(json.dumps(data))
    assert cal.load_calibrations(path)[measured.device].speed_moved == 1.0
