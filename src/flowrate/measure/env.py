"""The environment recorded with every result, so a number can be traced and compared.

Each probe that can fail gives ``None`` (NVML also says why) rather than an exception: a missing
detail must never cost the measurement it describes.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import psutil
import torch

from flowrate.measure import freed_memory

__all__ = ["collect_environment", "read_nvml"]

_T = TypeVar("_T")

# What a failing probe may raise: I/O, a missing driver or library, an odd value.
_PROBE_ERRORS = (OSError, RuntimeError, ValueError, AttributeError, AssertionError, ImportError)

_GIT_TIMEOUT_S = 2.0

# CPU features that decide which matmul/conv kernels run, hence the CPU throughput.
_FLAGS_OF_NOTE = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "fma"})

# Variables that change performance: thread pools, device visibility, allocators, kernel choice.
_ENV_NAMES = frozenset(
    {
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "KMP_AFFINITY",
        "KMP_BLOCKTIME",
        "LD_PRELOAD",  # jemalloc / tcmalloc change allocation-heavy workloads
        "MALLOC_CONF",  # jemalloc's settings
        "MALLOC_MMAP_MAX_",  # glibc's: what flowrate.measure.freed_memory sets
        "MALLOC_MMAP_THRESHOLD_",
        "MALLOC_TRIM_THRESHOLD_",
        "MALLOC_ARENA_MAX",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_LAUNCH_BLOCKING",
        "CUDA_DEVICE_MAX_CONNECTIONS",
        "CUDA_MODULE_LOADING",
        "CUBLAS_WORKSPACE_CONFIG",
        "NVIDIA_TF32_OVERRIDE",
        "PYTORCH_CUDA_ALLOC_CONF",
        "PYTORCH_NO_CUDA_MEMORY_CACHING",
        "TORCH_CUDNN_V8_API_ENABLED",
        "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    }
)
_ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCHINDUCTOR_")


def _probe(fn: Callable[[], _T]) -> _T | None:
    try:
        return fn()
    except _PROBE_ERRORS:
        return None


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):  # no git binary, timeout
        return None


def git_revision(source: Path) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout that tracks ``source``; (None, None) if there is none."""
    cwd = source.parent
    # Only trust a repository that tracks this file: a venv inside some other project's
    # checkout would otherwise report that project's commit.
    tracked = _git(cwd, "ls-files", "--error-unmatch", "--", source.name)
    head = _git(cwd, "rev-parse", "HEAD") if tracked and tracked.returncode == 0 else None
    if head is None or head.returncode != 0:  # not a checkout, or no commit yet
        return None, None
    status = _git(cwd, "status", "--porcelain", "--untracked-files=no")
    dirty = bool(status.stdout.strip()) if status and status.returncode == 0 else None
    return head.stdout.strip(), dirty


def _flowrate_info() -> dict[str, Any]:
    try:
        version = importlib.metadata.version("flowrate")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    commit, dirty = git_revision(Path(__file__))
    return {"version": version, "commit": commit, "dirty": dirty}


def _torch_info() -> dict[str, Any]:
    cudnn = torch.backends.cudnn
    return {
        "version": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": _probe(lambda: cudnn.version() if cudnn.is_available() else None),
        "debug": torch.version.debug,
        "num_threads": torch.get_num_threads(),
        "num_interop_threads": torch.get_num_interop_threads(),
    }


def _proc_cpuinfo() -> dict[str, str]:
    """The first processor's block of /proc/cpuinfo: instant, unlike py-cpuinfo (~1 s)."""
    fields: dict[str, str] = {}
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                break
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    return fields


def _py_cpuinfo() -> dict[str, Any]:
    """~1 s, so only used when the kernel does not name the CPU (some ARM kernels)."""
    import cpuinfo

    info: dict[str, Any] = cpuinfo.get_cpu_info()
    return info


def _cpu_info() -> dict[str, Any]:
    proc = _probe(_proc_cpuinfo) or {}
    model = proc.get("model name")
    flags = set((proc.get("flags") or proc.get("Features") or "").split())
    if not model:
        info = _probe(_py_cpuinfo) or {}
        model = info.get("brand_raw") or platform.processor() or None
        flags |= set(info.get("flags", []))
    freq = _probe(psutil.cpu_freq)
    return {
        "model": model,
        "physical_cores": _probe(lambda: psutil.cpu_count(logical=False)),
        "logical_cores": _probe(psutil.cpu_count),
        "architecture": platform.machine(),
        "frequency_mhz": (freq.max or freq.current or None) if freq else None,
        "flags_of_note": sorted(flags & _FLAGS_OF_NOTE),
    }


_NVML_FIELDS = (
    "driver_version",
    "sm_clock_mhz",
    "max_sm_clock_mhz",
    "memory_clock_mhz",
    "power_limit_w",
)


def read_nvml(index: int) -> dict[str, Any]:
    """Driver, clocks and power limit of the GPU at NVML ``index``, each None where unreadable."""
    out: dict[str, Any] = dict.fromkeys(_NVML_FIELDS)
    try:
        import pynvml
    except ImportError:
        out["nvml"] = {"available": False, "reason": "pynvml missing: pip install nvidia-ml-py"}
        return out
    try:
        pynvml.nvmlInit()
    except (pynvml.NVMLError, OSError) as exc:
        out["nvml"] = {"available": False, "reason": f"nvmlInit failed: {exc}"}
        return out

    def call(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except pynvml.NVMLError:  # e.g. NotSupported on this GPU
            return None

    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        driver = call(pynvml.nvmlSystemGetDriverVersion)
        out["driver_version"] = driver.decode() if isinstance(driver, bytes) else driver
        sm, mem = pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM
        out["sm_clock_mhz"] = call(pynvml.nvmlDeviceGetClockInfo, handle, sm)
        out["max_sm_clock_mhz"] = call(pynvml.nvmlDeviceGetMaxClockInfo, handle, sm)
        out["memory_clock_mhz"] = call(pynvml.nvmlDeviceGetClockInfo, handle, mem)
        limit_mw = call(pynvml.nvmlDeviceGetPowerManagementLimit, handle)
        out["power_limit_w"] = limit_mw / 1000 if limit_mw is not None else None
        out["nvml"] = {"available": True}
    except pynvml.NVMLError as exc:
        out["nvml"] = {"available": False, "reason": f"no NVML device {index}: {exc}"}
    finally:
        call(pynvml.nvmlShutdown)
    return out


def _nvml_index(index: int) -> int | None:
    """NVML numbers all GPUs, torch only the visible ones: map through CUDA_VISIBLE_DEVICES."""
    mapped = _probe(lambda: torch.cuda._get_nvml_device_index(index))  # torch's own mapping
    if mapped is None and "CUDA_VISIBLE_DEVICES" not in os.environ:
        return index  # identical numbering; never guess when the variable renumbers
    return mapped


def _device_info(device: torch.device, cpu_model: str | None) -> dict[str, Any]:
    if device.type != "cuda":
        return {"type": device.type, "name": cpu_model if device.type == "cpu" else None}
    index = device.index if device.index is not None else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    nvml_index = _nvml_index(index)
    if nvml_index is None:
        reason = f"cannot map cuda:{index} to an NVML index under CUDA_VISIBLE_DEVICES"
        nvml = dict.fromkeys(_NVML_FIELDS) | {"nvml": {"available": False, "reason": reason}}
    else:
        nvml = read_nvml(nvml_index)
    return {
        "type": "cuda",
        "name": props.name,
        "index": index,
        "compute_capability": f"{props.major}.{props.minor}",
        "memory_bytes": props.total_memory,
        "multiprocessor_count": props.multi_processor_count,
        **nvml,
    }


def device_name(device: torch.device) -> str:
    """The name a peak table looks up: the GPU's, or the CPU model's."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "cpu":
        model = (_probe(_proc_cpuinfo) or {}).get("model name") or platform.processor()
        return model or "unknown CPU"
    return device.type


def _env_vars() -> dict[str, str]:
    env = sorted(os.environ.items())
    return {k: v for k, v in env if k in _ENV_NAMES or k.startswith(_ENV_PREFIXES)}


def collect_environment(device: torch.device, argv: list[str] | None = None) -> dict[str, Any]:
    """Everything that may explain a difference between two results, JSON-serialisable."""
    mem = _probe(psutil.virtual_memory)
    cpu = _probe(_cpu_info)
    cpu_model = cpu["model"] if cpu else None
    device_info = _probe(lambda: _device_info(device, cpu_model)) or {
        "type": device.type,
        "name": None,
    }
    return {
        "flowrate": _flowrate_info(),
        "command_line": list(sys.argv if argv is None else argv),
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "torch": _probe(_torch_info),
        "device": device_info,
        "cpu": cpu,
        "memory": {"total_bytes": mem.total, "available_bytes": mem.available} if mem else None,
        "freed_memory": freed_memory.describe(),  # what the allocator does with freed memory
        "os": {
            "system": platform.system(),
            "release": platform.release(),
            "platform": platform.platform(),
        },
        "hostname": platform.node(),
        "process_id": os.getpid(),
        "env_vars": _env_vars(),
        "collected_at": datetime.now(UTC).isoformat(),
    }
