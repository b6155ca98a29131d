"""`flowrate validate`, `estimate` and `compile` end to end, and the estimate every run records."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from estimate_factories import cpu_calibration
from flowrate.estimate.calibration import save_calibration

RUN = ("--preheat", "1", "--steps", "3")
DEBUG = ("-p", "transformer", "--size", "debug")


@pytest.fixture
def calibrated() -> None:
    """This machine's CPU has a (made-up, round) calibration."""
    save_calibration(cpu_calibration())


def test_validate_passes_a_good_configuration(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("validate", *DEBUG)
    assert out.code == 0, out.stderr
    assert "OK: transformer/debug train fp32 batch 4" in out.stderr
    assert "ran on the meta device" in out.stderr and "resident" in out.stderr


def test_validate_lists_every_problem_in_one_run(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("validate", *DEBUG, "--heads", "3", "--precision", "tf32")
    assert out.code == 1
    assert "2 problems" in out.stderr
    assert "1. --heads: must divide hidden (64); got 3 heads" in out.stderr
    assert "2. --precision: tf32 is a CUDA tensor-core format" in out.stderr
    assert "Traceback" not in out.stderr


BAD_MODEL = """
import torch
from torch import nn
import flowrate


class Mismatch(flowrate.Problem):
    name = "mismatch"

    def build_model(self):
        return nn.Sequential(nn.Linear(16, 32), nn.Linear(64, 4))

    def make_batch(self, batch_size, device, generator):
        return (torch.randn(batch_size, 16, device=device, generator=generator),)

    def loss(self, model, batch):
        return model(batch[0]).sum()  # line 17

    def parameter_count(self):
        return 16 * 32 + 32 + 64 * 4 + 4

    def forward_flops_per_sample(self):
        return 0


def make_problem():
    return Mismatch()
"""


def test_validate_finds_a_shape_mismatch_in_a_users_forward(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad_model.py"
    path.write_text(BAD_MODEL)
    out = run_cli("validate", "-p", f"{path}:make_problem", "--precision", "tf32")
    assert out.code == 1
    assert "the forward pass fails: RuntimeError:" in out.stderr
    assert "(bad_model.py:17)" in out.stderr
    assert "--precision: tf32" in out.stderr
    assert "Traceback" not in out.stderr and "meta for aten" not in out.stderr


def test_validate_says_by_how_much_a_model_does_not_fit_and_what_would(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("validate", "-p", "gpt-1.3b", "--target", "a10", "--batch-size", "1")
    assert out.code == 1
    message = " ".join(out.stderr.split())
    assert "resident training needs 27.2 GiB, the device (NVIDIA A10) has 24 GiB (13% over)" in message
    assert "try --precision pure-bf16, or --execution streaming" in message


def test_validate_suggests_a_batch_size_that_fits(run_cli) -> None:  # type: ignore[no-untyped-def]
    from flowrate.config import Mode, OptimizerName, Precision
    from flowrate.estimate.memory import resident_need
    from flowrate.estimate.trace import trace_step
    from flowrate.measure.peaks import DevicePeak, registered_peaks
    from flowrate.problems.registry import get_problem

    trace = trace_step(
        get_problem("transformer", "debug"),
        mode=Mode.TRAIN,
        precision=Precision.FP32,
        optimizer=OptimizerName.ADAMW,
        batch_size=8,
    )
    need = resident_need(trace)
    per_sample = (need.parts["activations"] + need.parts["working set"]) / 8
    capacity = need.device_bytes - 5 * per_sample  # 3 samples fit
    tiny = DevicePeak(
        name="Tiny Test GPU",
        match=("tinytestgpu",),
        dense_flops={"fp32": 1e12},
        memory_bandwidth=1e11,
        host_link_bandwidth=1e10,
        source="a test",
        memory_capacity=capacity,
    )
    with registered_peaks(tiny):
        out = run_cli("validate", *DEBUG, "--batch-size", "8", "--target", "tinytestgpu")
    assert out.code == 1
    message = " ".join(out.stderr.split())
    assert "the device (Tiny Test GPU) has" in message and "% over): try --batch-size 2" in message


def test_validate_checks_the_precision_on_a_target(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("validate", *DEBUG, "--target", "v100-sxm2", "--precision", "bf16")
    assert out.code == 1
    assert (
        "--precision: the peak table has no bf16 figure for NVIDIA Tesla V100 SXM2 (it lists fp32, fp16): "
        "if its datasheet gives one, add it with FLOWRATE_PEAKS=peaks.json"
    ) in " ".join(out.stderr.split())


def test_validate_checks_streamings_host_memory(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import psutil

    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(available=1 << 20, total=1 << 30))
    out = run_cli("validate", *DEBUG, "--execution", "streaming")
    assert out.code == 1
    message = " ".join(out.stderr.split())
    assert "streaming training needs" in message and "the host (this machine) has 1 MiB" in message
    assert "--optimizer sgd" in message


def test_an_unknown_target_lists_the_known_devices(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("estimate", *DEBUG, "--target", "h900")
    assert out.code == 2
    assert "unknown device 'h900' (did you mean h200" in out.stderr
    assert "known devices:" in out.stderr and "a100-80gb" in out.stderr


def test_estimate_prints_the_report_for_a_target_not_present(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("estimate", "-p", "gpt2", "--precision", "bf16", "--target", "h100", "--json")
    assert out.code == 0, out.stderr
    report = out.json()
    assert report["device"]["name"] == "NVIDIA H100 SXM5 80GB"
    step = report["estimate"]
    assert step["samples_per_sec"] == pytest.approx(step["batch_size"] / step["step_s"])
    train_flops = report["forward_flops_per_sample"] + report["backward_flops_per_sample"]
    assert step["samples_per_sec"] * train_flops < 989.4e12  # never above the H100's bf16 datasheet peak
    assert report["streaming"]["min_tokens_per_load"] > 1000
    assert report["parameters"] == 124_439_808 and len(report["block_rows"]) == 14
    text = run_cli("estimate", "-p", "gpt2", "--precision", "bf16", "--target", "h100")
    for label in (
        "model FLOPs",
        "bytes per step",
        "intensity",
        "activations",
        "memory",
        "estimate",
        "per block",
    ):
        assert label in text.stdout


def test_a_cpu_estimate_needs_a_calibration(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("estimate", *DEBUG, "--out", str(tmp_path))
    assert out.code == 0
    assert "flowrate estimate --calibrate" in out.stdout  # the estimate row says why it is empty
    assert (tmp_path / "compile_report.txt").read_text().startswith("compile report: transformer/debug")
    assert json.loads((tmp_path / "compile_report.json").read_text())["estimate"] is None


def test_every_run_records_its_estimate_and_check_compares_them(run_cli, calibrated) -> None:  # type: ignore[no-untyped-def]
    first = run_cli("run", *DEBUG, *RUN, "--json", "-t", "est")
    assert first.code == 0, first.stderr
    estimate = first.json()["estimate"]
    assert estimate["samples_per_sec"] > 0 and estimate["cost_model"] == "roofline-2"
    assert estimate["reason"] is None
    assert estimate["samples_per_sec"] == pytest.approx(first.json()["batch_size"] / estimate["step_s"])
    second = run_cli("run", "-p", "fc_mnist", "--size", "debug", *RUN, "-t", "est")
    assert second.code == 0
    check = run_cli("estimate", "--check", "--tag", "est")
    assert check.code == 0, check.stderr
    assert "transformer/debug" in check.stdout and "fc_mnist/debug" in check.stdout
    assert "predicted" in check.stdout and "ratio" in check.stdout
    assert "2 run(s) with an estimate: median |error|" in " ".join(check.stderr.split())
    assert run_cli("estimate", "--check", "--layers", "3").code == 2
    assert run_cli("estimate", *DEBUG, "est").code == 2  # a run reference without --check


def test_a_run_without_calibration_records_why(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("run", *DEBUG, *RUN, "--json", "--no-store")
    estimate = out.json()["estimate"]
    assert estimate["samples_per_sec"] is None and "--calibrate" in estimate["reason"]


@pytest.mark.slow
def test_the_second_compile_hits_the_cache_and_run_compile_reuses_it(run_cli) -> None:  # type: ignore[no-untyped-def]
    args = ("-p", "fc_mnist", "--size", "debug")
    cold = run_cli("compile", *args, "--json")
    assert cold.code == 0, cold.stderr
    first = cold.json()["compile"]
    assert first["cache_hit"] is False and first["cache_misses"] > 0
    warm = run_cli("compile", *args, "--json").json()["compile"]
    assert warm["cache_hit"] is True and warm["cache_hits"] > 0 and warm["directory"] == first["directory"]
    entry = Path(first["directory"])
    manifest = json.loads((entry / "manifest.json").read_text())
    assert [c["cache_hit"] for c in manifest["compiles"]] == [False, True]
    assert manifest["config"]["problem"] == "fc_mnist" and manifest["torch"]
    assert (entry / "compile_report.txt").exists() and (entry / "compile_report.json").exists()
    run = run_cli("run", *args, "--compile", *RUN, "--json", "--no-store")
    assert run.code == 0, run.stderr
    result = run.json()
    assert result["config"]["compile"] is True
    assert result["compile"]["cache_hit"] is True and result["compile"]["directory"] == first["directory"]


@pytest.mark.parametrize(("moved", "warned"), [(1.62, True), (0.6, True), (1.04, False)])
def test_calibrate_warns_when_the_machine_changed_speed_while_it_measured(
    run_cli, monkeypatch: pytest.MonkeyPatch, moved: float, warned: bool
) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    from flowrate.estimate import calibrating
    from flowrate.estimate.calibration import load_calibrations

    made = replace(cpu_calibration(), speed_moved=moved)
    monkeypatch.setattr(calibrating, "calibrate", lambda device, **_: made)
    out = run_cli("estimate", "--calibrate")
    assert out.code == 0, out.stderr
    note = f"the machine's speed moved x{moved:.2f} while it was calibrated"
    assert (note in out.stderr) is warned and ("calibrate again" in out.stderr) is warned
    assert load_calibrations()[made.device].speed_moved == moved  # saved either way, as measured
    report = run_cli("estimate", *DEBUG, "--device", "cpu")
    assert (note in report.stdout) is warned  # every estimate priced with it says so


def test_calibrate_and_save_calibrates_with_the_threads_asked_and_saves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    from flowrate.estimate import calibrating
    from flowrate.estimate.calibration import load_calibrations

    made = cpu_calibration()
    threads_inside: list[int] = []

    def fake(device: torch.device, **_: object) -> object:
        threads_inside.append(torch.get_num_threads())
        return made

    monkeypatch.setattr(calibrating, "calibrate", fake)
    before = torch.get_num_threads()
    started: list[tuple[str, int]] = []
    calibration, path = calibrating.calibrate_and_save(
        "cpu", 1, on_start=lambda device, threads: started.append((device, threads))
    )
    assert calibration is made and started == [("cpu", 1)] and threads_inside == [1]
    assert torch.get_num_threads() == before  # PyTorch's own again after
    assert load_calibrations(path)[made.device] == made
