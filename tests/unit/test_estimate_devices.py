"""Target devices from the peak table, calibrations, and the rates they combine into."""

from __future__ import annotations

import json
import math

import pytest
import torch

from estimate_factories import cpu_calibration
from flowrate.errors import ConfigError, FlowrateError
from flowrate.estimate import calibrating, overheads
from flowrate.estimate import calibration as cal
from flowrate.estimate.devices import (
    DEFAULT_EFFICIENCY,
    EstimateUnavailable,
    device_model,
    local_device,
    resolve_target,
    target_device,
)
from flowrate.measure.peaks import find_device


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("h100", "NVIDIA H100 SXM5 80GB"),
        ("H100 PCIe", "NVIDIA H100 PCIe"),
        ("h100-nvl", "NVIDIA H100 NVL"),
        ("a100-80gb", "NVIDIA A100 80GB SXM4"),
        ("a100 40gb", "NVIDIA A100 40GB (SXM4 or PCIe)"),
        ("rtx 4090", "NVIDIA GeForce RTX 4090"),
        ("NVIDIA L40S", "NVIDIA L40S"),
    ],
)
def test_targets_resolve_by_their_short_names(text: str, name: str) -> None:
    peak, calibrated = resolve_target(text)
    assert peak is not None and peak.name == name and calibrated is None


def test_an_unknown_target_lists_the_known_ones_and_close_matches() -> None:
    with pytest.raises(ConfigError) as mistake:
        resolve_target("h900")
    assert mistake.value.field == "target"
    assert "did you mean h200" in mistake.value.message
    for key in ("h100", "a100-80gb", "mi300x", "l4"):
        assert key in mistake.value.message
    with pytest.raises(ConfigError, match="matches several devices: a100-80gb-pcie, a100-80gb, a100-40gb"):
        resolve_target("a100")


def test_an_uncalibrated_gpu_runs_at_its_datasheet_peak_times_the_default_efficiency() -> None:
    model = target_device("h100")
    assert model.large_flop_rate("bf16") == pytest.approx(989.4e12 * DEFAULT_EFFICIENCY["flops"])
    assert model.bandwidth_rate(1e9) == pytest.approx(3.35e12 * DEFAULT_EFFICIENCY["memory"])
    assert model.memory_capacity == 80 * 2**30
    assert "not calibrated" in model.basis and model.source is not None


def test_a_calibration_scales_the_datasheet_by_the_efficiency_it_measured() -> None:
    peak = find_device("NVIDIA H100 80GB HBM3")
    measured = cpu_calibration(flops=0.7 * 989.4e12)  # as if measured on an H100: bf16 and fp32 keys
    measured = cal.Calibration(
        **{**measured.__dict__, "flops": {"matmul": {"bf16": [(1.0, 0.7 * 989.4e12)]}}}
    )
    model = device_model("NVIDIA H100 80GB HBM3", peak, measured, None)
    assert model.large_flop_rate("bf16") == pytest.approx(0.7 * 989.4e12)
    assert model.large_flop_rate("tf32") == pytest.approx(0.7 * 494.7e12)  # not timed: same efficiency
    assert "measured" in model.basis


def test_a_cpu_without_calibration_says_how_to_get_one(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(EstimateUnavailable, match="flowrate estimate --calibrate"):
        local_device(torch.device("cpu"))
    cal.save_calibration(cpu_calibration())
    model = local_device(torch.device("cpu"))
    assert model.large_flop_rate("fp32") == 50e9 and model.device_type == "cpu"
    peak, calibrated = resolve_target(model.name.lower(), list(cal.load_calibrations()))
    assert peak is None and calibrated == model.name


def test_calibrations_round_trip_and_damage_is_refused(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "calibration.json"  # type: ignore[operator]
    saved = cpu_calibration()
    cal.save_calibration(saved, path)
    assert cal.load_calibrations(path)[saved.device] == saved
    path.write_text(json.dumps({"version": 99, "devices": {}}))
    with pytest.raises(FlowrateError, match="version 99"):
        cal.load_calibrations(path)
    path.write_text("{not json")
    with pytest.raises(FlowrateError, match=r"recalibrate|again"):
        cal.load_calibrations(path)
    assert cal.load_calibrations(tmp_path / "absent.json") == {}  # type: ignore[operator]


def test_calibrate_measures_every_kind_of_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    # a miniature ladder: the same code path in a fraction of a second
    monkeypatch.setitem(cal.GEMM_SIDES, "cpu", (16, 64))
    monkeypatch.setitem(cal.CONV, "cpu", ((1, 8), (4, 8)))
    monkeypatch.setitem(cal.ATTENTION_LENGTHS, "cpu", (8, 16))
    monkeypatch.setitem(cal.COPY_BYTES, "cpu", (4096, 65536))
    monkeypatch.setitem(cal.PRECISIONS, "cpu", (cal.Precision.FP32,))
    monkeypatch.setitem(cal.THIN_SIDE, "cpu", 64)
    monkeypatch.setattr(cal, "THIN", (1, 16))
    monkeypatch.setitem(cal.ELEMENTWISE_SIZE, "cpu", 1 << 16)
    monkeypatch.setattr(cal, "OPTIMIZER_PARAMETERS", 1 << 12)
    monkeypatch.setattr(overheads, "OPTIMIZER_GRID", ((1, 64), (8, 64), (4, 1 << 12)))
    monkeypatch.setattr(overheads, "BLOCKS", (1, 3))
    # calibrate() keeps freed memory for good: not in the test process, where later runs release it
    monkeypatch.setattr(calibrating.freed_memory, "apply", lambda setting: None)
    measured = calibrating.calibrate(torch.device("cpu"), seconds_per_point=0.003)
    for op_class in (
        "matmul",
        "conv",
        "conv3x3_backward",
        "attention",
        "attention_backward",
        "matmul_thin",
        "conv_thin",
    ):
        assert all(rate > 0 for _, rate in measured.flops[op_class]["fp32"]), op_class
    assert [size for size, _ in measured.bandwidth] == [2 * 4096, 2 * 65536]  # read + write bytes
    assert "gelu[tanh]" in measured.elementwise and set(measured.optimizer) == {"adamw", "sgd"}
    rates = [rate for _, rate in measured.bandwidth]
    rates += [*measured.elementwise.values(), *measured.optimizer.values()]
    assert all(0 < rate < math.inf for rate in rates)
    # the magnitude of the overhead is timing, checked on a GPU (tests/gpu/test_calibration_gpu.py)
    assert set(measured.launch_overhead_s) == {"train", "infer"}
    assert all(0 < s < math.inf for s in measured.launch_overhead_s.values())
    assert measured.threads == torch.get_num_threads() and measured.device_type == "cpu"
    # the overhead terms: each measured (a quiet machine could show a zero residual, never less)
    terms = measured.overheads
    assert terms is not None and set(terms.dispatch_s) == set(overheads.DISPATCH_CLASSES)
    assert all(0 < s < math.inf for s in terms.dispatch_s.values())  # magnitudes: on a GPU
    assert terms.autograd_node_s >= 0 and terms.module_s >= 0 and set(terms.step_s) == {"train", "infer"}
    assert set(terms.optimizer) == {"adamw", "sgd"}
    # the working-set curve: one point per reference, ascending in bytes per kernel, none below 1
    (small, small_factor), (large, large_factor) = terms.working_set
    assert 0 < small < large and small_factor >= 1 and large_factor >= 1
    assert measured.fingerprint == cal.machine_fingerprint(torch.device("cpu"))


def _as_h100(measured: cal.Calibration, **changes: object) -> cal.Calibration:
    return cal.Calibration(**{**measured.__dict__, "device": "NVIDIA H100 80GB HBM3", **changes})


def test_a_rate_measured_above_the_datasheet_peak_is_capped_at_it() -> None:
    # what the first GPU calibration recorded: a 1024 x 1024 bf16 GEMM at 3.6 PFLOP/s on an H100
    # whose datasheet says 989 TFLOP/s, the launch left out of a call the launch overlaps
    peak = find_device("NVIDIA H100 80GB HBM3")
    measured = _as_h100(
        cpu_calibration(),
        device_type="cuda",
        method=cal.CALIBRATION_METHOD,
        flops={"matmul": {"bf16": [(2.7e8, 456e12), (2.1e9, 3572e12)], "fp32": [(2.7e8, 9.5e12)]}},
    )
    model = device_model(measured.device, peak, measured, None)
    assert model.flop_rate("bf16", 2.7e8) == pytest.approx(456e12)  # below the peak: as measured
    assert model.large_flop_rate("bf16") == pytest.approx(989.4e12)
    assert "1 rates above the datasheet peak capped" in model.basis
    assert "capped" not in device_model(measured.device, None, measured, None).basis  # no datasheet


def test_a_gpu_calibration_timed_by_the_earlier_method_is_not_used(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "calibration.json"  # type: ignore[operator]
    gpu = _as_h100(cpu_calibration(), device_type="cuda", method=1)
    cpu = cpu_calibration()  # a CPU's calls block: the earlier method timed it right
    cal.save_calibration(cpu, path)
    data = json.loads(path.read_text())
    data["devices"][gpu.device] = {k: v for k, v in gpu.to_dict().items() if k != "method"}
    path.write_text(json.dumps(data))
    with pytest.warns(cal.CalibrationWarning, match="earlier method .* not used; run `flowrate estimate"):
        loaded = cal.load_calibrations(path)
    assert list(loaded) == [cpu.device]
    data["devices"][gpu.device]["method"] = cal.CALIBRATION_METHOD
    path.write_text(json.dumps(data))
    assert set(cal.load_calibrations(path)) == {cpu.device, gpu.device}
