"""Environment metadata: complete, JSON-safe, and never an exception, with NVML faked."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from flowrate.measure import env
from flowrate.measure.env import collect_environment, read_nvml
from flowrate.results.environment import environment_fingerprint, environment_from

HEX40 = re.compile(r"[0-9a-f]{40}")


def test_environment_is_json_serialisable() -> None:
    record = collect_environment(torch.device("cpu"), argv=["flowrate", "run"])
    assert json.loads(json.dumps(record)) == record


def test_expected_keys_present() -> None:
    record = collect_environment(torch.device("cpu"), argv=["flowrate", "run", "--json"])
    assert set(record) == {
        "flowrate",
        "command_line",
        "python",
        "torch",
        "device",
        "cpu",
        "memory",
        "freed_memory",
        "os",
        "hostname",
        "env_vars",
        "collected_at",
        "process_id",
    }
    assert record["command_line"] == ["flowrate", "run", "--json"]
    assert set(record["flowrate"]) == {"version", "commit", "dirty"}
    assert record["torch"]["version"] == torch.__version__
    assert record["torch"]["num_threads"] == torch.get_num_threads()
    assert record["device"] == {"type": "cpu", "name": record["cpu"]["model"]}
    assert record["memory"]["total_bytes"] >= record["memory"]["available_bytes"] > 0
    assert record["cpu"]["logical_cores"] >= 1
    assert record["collected_at"].endswith("+00:00")


def test_command_line_defaults_to_sys_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["flowrate", "bench"])
    assert collect_environment(torch.device("cpu"))["command_line"] == ["flowrate", "bench"]


def _proc_model() -> str | None:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    names = re.findall(r"^model name\s*:\s*(.*)$", text, flags=re.MULTILINE)
    return names[0].strip() if names else None


@pytest.mark.skipif(_proc_model() is None, reason="no 'model name' in /proc/cpuinfo")
def test_cpu_model_comes_from_proc_cpuinfo_without_py_cpuinfo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "cpuinfo", None)  # importing it would now fail
    assert collect_environment(torch.device("cpu"))["cpu"]["model"] == _proc_model()


def test_cpu_model_falls_back_to_py_cpuinfo(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = SimpleNamespace(get_cpu_info=lambda: {"brand_raw": "Fake CPU", "flags": ["avx2", "sse"]})
    monkeypatch.setattr(env, "_proc_cpuinfo", dict)
    monkeypatch.setitem(sys.modules, "cpuinfo", fake)
    cpu = collect_environment(torch.device("cpu"))["cpu"]
    assert cpu["model"] == "Fake CPU"
    assert cpu["flags_of_note"] == ["avx2"]


def test_env_vars_keep_only_performance_knobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("TORCHINDUCTOR_FREEZING", "1")
    monkeypatch.setenv("FLOWRATE_UNRELATED", "x")
    monkeypatch.setenv("TORCH_HOME", "/tmp/cache")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    found = collect_environment(torch.device("cpu"))["env_vars"]
    assert found["OMP_NUM_THREADS"] == "3"
    assert found["NCCL_DEBUG"] == "INFO"
    assert found["TORCHINDUCTOR_FREEZING"] == "1"
    assert "FLOWRATE_UNRELATED" not in found
    assert "TORCH_HOME" not in found
    assert "HOME" not in found
    assert "CUDA_VISIBLE_DEVICES" not in found


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA path")
def test_unusable_cuda_device_gives_none_not_an_exception() -> None:
    record = collect_environment(torch.device("cuda"))
    assert record["device"] == {"type": "cuda", "name": None}
    json.dumps(record)


class FakeNVMLError(Exception):
    pass


def fake_pynvml(calls: list[str], **overrides: Any) -> SimpleNamespace:
    """A pynvml stand-in for an H100 at index 0 with fixed readings."""

    def handle_by_index(index: int) -> str:
        if index != 0:
            raise FakeNVMLError("Invalid Argument")
        return "handle0"

    clocks = {("handle0", 1): 1980, ("handle0", 2): 2619}
    module = SimpleNamespace(
        NVMLError=FakeNVMLError,
        NVML_CLOCK_SM=1,
        NVML_CLOCK_MEM=2,
        nvmlInit=lambda: calls.append("init"),
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetHandleByIndex=handle_by_index,
        nvmlSystemGetDriverVersion=lambda: b"550.54.15",  # old pynvml returns bytes
        nvmlDeviceGetClockInfo=lambda h, kind: clocks[(h, kind)] // 2,
        nvmlDeviceGetMaxClockInfo=lambda h, kind: clocks[(h, kind)],
        nvmlDeviceGetPowerManagementLimit=lambda h: 700_000,  # milliwatts
    )
    vars(module).update(overrides)
    return module


def test_read_nvml_converts_units(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(calls))
    assert read_nvml(0) == {
        "driver_version": "550.54.15",
        "sm_clock_mhz": 990,
        "max_sm_clock_mhz": 1980,
        "memory_clock_mhz": 1309,
        "power_limit_w": 700.0,
        "nvml": {"available": True},
    }
    assert calls == ["init", "shutdown"]


def test_read_nvml_unsupported_query_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_supported(handle: str) -> int:
        raise FakeNVMLError("Not Supported")

    calls: list[str] = []
    fake = fake_pynvml(calls, nvmlDeviceGetPowerManagementLimit=not_supported)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    out = read_nvml(0)
    assert out["power_limit_w"] is None
    assert out["max_sm_clock_mhz"] == 1980
    assert out["nvml"] == {"available": True}


def test_read_nvml_unknown_device(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(calls))
    out = read_nvml(3)
    assert out["nvml"] == {"available": False, "reason": "no NVML device 3: Invalid Argument"}
    assert out["power_limit_w"] is None
    assert calls == ["init", "shutdown"]


def test_read_nvml_init_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_driver() -> None:
        raise FakeNVMLError("Driver Not Loaded")

    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([], nvmlInit=no_driver))
    out = read_nvml(0)
    assert out["nvml"] == {"available": False, "reason": "nvmlInit failed: Driver Not Loaded"}
    assert out["driver_version"] is None


def test_read_nvml_without_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    out = read_nvml(0)
    assert out["nvml"]["available"] is False
    assert "nvidia-ml-py" in out["nvml"]["reason"]
    assert all(out[k] is None for k in ("driver_version", "sm_clock_mhz", "power_limit_w"))


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")


def _git(repo: Path, *args: str) -> None:
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", *identity, *args], cwd=repo, check=True, capture_output=True)


@needs_git
def test_git_revision_of_a_checkout(tmp_path: Path) -> None:
    source = tmp_path / "env.py"
    source.write_text("x = 1\n")
    _git(tmp_path, "init", "-q")
    assert env.git_revision(source) == (None, None)  # tracked by nothing yet
    _git(tmp_path, "add", "env.py")
    assert env.git_revision(source) == (None, None)  # no commit yet: rev-parse HEAD fails
    _git(tmp_path, "commit", "-q", "-m", "first")
    commit, dirty = env.git_revision(source)
    assert commit is not None and HEX40.fullmatch(commit)
    assert dirty is False
    source.write_text("x = 2\n")
    assert env.git_revision(source) == (commit, True)


@needs_git
def test_git_revision_outside_a_checkout(tmp_path: Path) -> None:
    source = tmp_path / "env.py"
    source.write_text("x = 1\n")
    assert env.git_revision(source) == (None, None)


def test_git_revision_of_flowrate_itself() -> None:
    commit = collect_environment(torch.device("cpu"))["flowrate"]["commit"]
    assert commit is None or HEX40.fullmatch(commit)


def test_fingerprint_matches_same_setup_and_flags_a_change() -> None:
    a = collect_environment(torch.device("cpu"))
    b = collect_environment(torch.device("cpu"))
    assert environment_fingerprint(environment_from(a)) == environment_fingerprint(environment_from(b))
    assert set(environment_fingerprint(environment_from(a))) == {
        "device_name",
        "cpu_model",
        "torch_version",
        "cuda_version",
        "flowrate_version",
        "num_threads",
    }
    b["torch"]["num_threads"] += 1
    assert environment_fingerprint(environment_from(a)) != environment_fingerprint(environment_from(b))


def test_fingerprint_tolerates_missing_sections() -> None:
    fingerprint = environment_fingerprint(environment_from({"torch": None, "cpu": "not an object"}))
    assert len(fingerprint) == 6
    assert all(value is None for value in fingerprint.values())


def test_a_gpu_record_with_its_properties_and_nvml_readings_reads_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # every field _device_info writes for a GPU is one the validator knows (an 'index' was refused,
    # so every CUDA run in a fresh process failed to read its own result back)
    from factories import make_result
    from flowrate.results.schema import Result

    properties = SimpleNamespace(
        name="NVIDIA H200", major=9, minor=0, total_memory=150 << 30, multi_processor_count=132
    )
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: properties)
    monkeypatch.setattr(env, "_nvml_index", lambda index: 0)
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([]))
    device = env._device_info(torch.device("cuda", 0), None)
    assert device["index"] == 0 and device["driver_version"] == "550.54.15"
    data = make_result().to_dict()
    data["environment"]["device"] = device
    assert Result.from_dict(json.loads(json.dumps(data))).environment.device.multiprocessor_count == 132
