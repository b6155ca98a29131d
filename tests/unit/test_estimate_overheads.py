"""The framework's overhead terms: each priced by hand on a made-up calibration, the optimizer's
fit, the breakdown of a step, and calibrations that do not fit this machine."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

from estimate_factories import BANDWIDTH, OVERHEADS, US, TinyMLP, cpu_calibration, flat_device
from flowrate.cli.estimate_text import report_lines
from flowrate.config import Mode, OptimizerName, Precision, RunConfig
from flowrate.estimate import calibration as cal
from flowrate.estimate.cost import TERMS, estimate_step
from flowrate.estimate.devices import EstimateUnavailable, local_device
from flowrate.estimate.overheads import OptimizerCost, fit_optimizer
from flowrate.estimate.report import build_report
from flowrate.estimate.trace import trace_step


def _device():  # type: ignore[no-untyped-def]
    return dataclasses.replace(flat_device(), overheads=OVERHEADS)


def _trace(mode: Mode):  # type: ignore[no-untyped-def]
    return trace_step(
        TinyMLP(), mode=mode, precision=Precision.FP32, optimizer=OptimizerName.ADAMW, batch_size=2
    )


def test_each_term_of_a_training_step_priced_by_hand() -> None:
    # TinyMLP at batch 2: Linear(8, 16) -> ReLU -> Linear(16, 4), loss = sum; blocks = the 3 layers
    estimate = estimate_step(_trace(Mode.TRAIN), _device())
    terms = estimate.terms
    # outside the optimizer: 19 views, 5 matmuls (2 addmm, 3 mm), 3 elementwise (relu, the seed's
    # ones_like, threshold_backward), 3 reductions (the loss's sum, two bias-gradient sums)
    assert terms["dispatch"] == pytest.approx((19 * 5 + 5 * 1 + 3 * 2 + 3 * 3) * US)
    # nodes: t, addmm, relu, t, addmm, sum; and an AccumulateGrad per parameter tensor (4)
    assert terms["autograd"] == pytest.approx((6 + 4) * 7 * US)
    assert terms["modules"] == pytest.approx(4 * 11 * US)  # the Sequential and its 3 layers
    # 4 tensors, 212 fp32 parameters: a + b·4 + c·848 bytes; its fused kernel costs nothing more
    assert terms["optimizer"] == pytest.approx(13 * US + 4 * 17 * US + 848e-9)
    assert terms["step"] == pytest.approx(19 * US)
    # every kernel is memory-bound on the flat device: 3576 bytes read + written outside the update
    assert terms["memory"] == pytest.approx(3576 / BANDWIDTH) and "compute" not in terms
    assert estimate.step_s == pytest.approx(sum(terms.values()))
    assert estimate.step_s == pytest.approx(330.2056 * US)
    assert estimate.phase_s["optimizer"] == pytest.approx(terms["optimizer"])


def test_an_inference_step_pays_no_autograd_and_no_optimizer() -> None:
    estimate = estimate_step(_trace(Mode.INFER), _device())
    # 2 views (t), 2 addmm, relu, sum; 4 module calls; inference's own fixed cost
    assert estimate.terms == pytest.approx(
        {
            "memory": 1492 / BANDWIDTH,
            "dispatch": (2 * 5 + 2 * 1 + 2 + 3) * US,
            "modules": 44 * US,
            "step": 23 * US,
        }
    )
    assert estimate.step_s == pytest.approx(84.1492 * US)


def test_the_breakdown_sums_to_the_step_and_names_what_dominates_each_block() -> None:
    trace = _trace(Mode.TRAIN)
    estimate = estimate_step(trace, _device())
    assert set(estimate.terms) <= set(TERMS)
    assert estimate.block_terms is not None and estimate.block_s is not None
    first = estimate.block_terms[0]  # Linear(8, 16): t and addmm forward; t, mm, t, sum, view, … back
    assert first["dispatch"] == pytest.approx((7 * 5 + 2 * 1 + 3) * US)
    assert first["autograd"] == pytest.approx((2 + 2) * 7 * US)  # t, addmm; weight and bias
    assert first["modules"] == pytest.approx(11 * US)
    assert first["memory"] == pytest.approx((768 + 704 + 192) / BANDWIDTH)
    outside = estimate.step_s - sum(estimate.block_s)
    assert outside == pytest.approx(
        (1 * 5 + 1 * 2 + 1 * 3) * US + 36 / BANDWIDTH + 8 / BANDWIDTH + 7 * US + 11 * US
        + estimate.terms["optimizer"] + 19 * US
    )  # fmt: skip
    problem = TinyMLP()
    config = RunConfig(problem="tiny_mlp").for_problem(problem.modes, problem.default_mode, "tiny_mlp")
    report = build_report(config, problem, _device(), batch_size=2, host_capacity=1e9)
    # the ReLU block: relu, threshold_backward and a detach (9 µs) against its module call (11 µs)
    assert [row.dominant for row in report.block_rows] == ["dispatch", "modules", "dispatch"]
    assert sum(sum(row.terms.values()) for row in report.block_rows if row.terms) == pytest.approx(
        sum(estimate.block_s)
    )
    text = "\n".join(report_lines(report))
    assert "time: memory 0%, dispatch 35%, autograd 21%, modules 13%, optimizer 25%, step 6%" in text
    assert text.splitlines()[-2].endswith("modules")  # the ReLU block's row
    assert report.to_dict()["device"]["overheads"]["autograd_node_s"] == 7 * US


def test_a_large_models_update_runs_at_the_measured_rate_of_a_large_update() -> None:
    # the fit's per-byte term comes from updates that stay in cache; a model whose parameters are
    # slower to update at the calibration's 16 Mi-parameter rate pays that rate instead
    trace = _trace(Mode.TRAIN)  # 212 parameters
    fitted = estimate_step(trace, _device()).terms["optimizer"]
    slow = dataclasses.replace(_device(), optimizer={"adamw": 212 / (2 * fitted)})
    assert estimate_step(trace, slow).terms["optimizer"] == pytest.approx(2 * fitted)
    fast = dataclasses.replace(_device(), optimizer={"adamw": 212 / (fitted / 2)})
    assert estimate_step(trace, fast).terms["optimizer"] == pytest.approx(fitted)


def test_on_a_gpu_the_host_terms_hide_the_kernels_of_a_small_model() -> None:
    # TinyMLP's kernels take a third of a µs of memory traffic in all, its host over 200 µs: on a
    # GPU the kernels run while the host dispatches, so the step is the host's time (dispatch,
    # autograd and module calls, all of it exposed) plus the optimizer's and the step's fixed time
    trace = _trace(Mode.TRAIN)
    serial = estimate_step(trace, _device())
    gpu = estimate_step(trace, dataclasses.replace(_device(), device_type="cuda"))
    host = sum(serial.terms[name] for name in ("dispatch", "autograd", "modules"))
    fixed = serial.terms["optimizer"] + serial.terms["step"]
    assert host <= gpu.step_s - fixed <= host + serial.terms["memory"]
    assert gpu.step_s == pytest.approx(serial.step_s - serial.terms["memory"], abs=serial.terms["memory"])
    assert gpu.terms["memory"] == serial.terms["memory"]
    assert gpu.step_s == pytest.approx(sum(gpu.terms.values()))
    assert gpu.step_s == pytest.approx(sum(gpu.phase_s.values()))


def test_without_overhead_terms_each_kernel_pays_the_launch_overhead() -> None:
    estimate = estimate_step(_trace(Mode.INFER), flat_device(overhead=5 * US))
    assert estimate.terms == pytest.approx({"memory": 1492 / BANDWIDTH, "launch": 4 * 5 * US})


def test_the_optimizer_fit_recovers_its_terms_from_exact_timings() -> None:
    truth = OptimizerCost(20 * US, 3 * US, 2e-10)
    grid = [
        (k, k * n * 4) for k, n in ((1, 64), (8, 64), (64, 64), (8, 1 << 14), (64, 1 << 12), (4, 1 << 20))
    ]
    fitted = fit_optimizer([(k, b, truth.seconds(k, b)) for k, b in grid])
    assert fitted.per_step == pytest.approx(truth.per_step, rel=1e-6)
    assert fitted.per_tensor == pytest.approx(truth.per_tensor, rel=1e-6)
    assert fitted.per_byte == pytest.approx(truth.per_byte, rel=1e-6)
    # timings that fall with more tensors would make a term negative: it is dropped, never subtracted
    falling = [(1, 1e3, 10e-6), (10, 1e3, 5e-6), (10, 1e7, 1e-3)]
    dropped = fit_optimizer(falling)
    assert dropped.per_tensor == 0.0 and dropped.per_step > 0 and dropped.per_byte > 0


def test_a_calibration_from_another_machine_is_warned_about_and_not_used() -> None:
    here = cpu_calibration()
    cal.save_calibration(dataclasses.replace(here, fingerprint={**here.fingerprint, "hostname": "elsewhere"}))
    elsewhere = r"another machine \(hostname 'elsewhere', here"
    with (
        pytest.warns(cal.CalibrationWarning, match=elsewhere) as said,
        pytest.raises(EstimateUnavailable, match="flowrate estimate --calibrate"),
    ):
        local_device(torch.device("cpu"))
    assert len(said) == 1 and "\n" not in str(said[0].message)
    cal.save_calibration(dataclasses.replace(here, fingerprint={**here.fingerprint, "num_threads": 64}))
    with pytest.warns(cal.CalibrationWarning, match="num_threads 64"):
        assert cal.local_calibration(torch.device("cpu")) is None


def test_a_calibration_from_another_torch_is_used_with_a_suggestion_to_recalibrate() -> None:
    cal.save_calibration(dataclasses.replace(cpu_calibration(), torch_version="1.13.1"))
    with pytest.warns(
        cal.CalibrationWarning, match=r"torch 1\.13\.1, this is .*run `flowrate estimate --calibrate`"
    ):
        model = local_device(torch.device("cpu"))
    assert model.large_flop_rate("fp32") == 50e9
    cal.save_calibration(cpu_calibration())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # this machine's own calibration: no warning
        local_device(torch.device("cpu"))


def test_overheads_round_trip_through_the_calibration_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    saved = dataclasses.replace(cpu_calibration(), overheads=OVERHEADS)
    path = tmp_path / "calibration.json"
    cal.save_calibration(saved, path)
    assert cal.load_calibrations(path)[saved.device] == saved
