"""Memory: the device's peak allocated and reserved bytes, and the process's peak resident set.

Device peaks come from PyTorch's caching allocator (``torch.cuda.max_memory_*``), reset when the
run starts so they belong to this run. The process peak RSS is the kernel's high-water mark
(VmHWM); on Linux writing "5" to /proc/self/clear_refs resets it, so it too covers this run only.
Where it cannot be reset, the figure covers the whole process life and says so.
"""

from __future__ import annotations

import contextlib
import resource
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

_PROC = Path("/proc/self")


@dataclass(frozen=True)
class MemoryReport:
    device_peak_allocated_bytes: int | None  # None on the CPU: PyTorch does not track it
    device_peak_reserved_bytes: int | None
    process_peak_rss_bytes: int | None
    # "run": the peaks cover this run; "process": the RSS peak covers the process since it started
    rss_scope: str
    reason: str | None = None  # why a device figure is empty


def reset_peaks(device: torch.device, proc: Path = _PROC) -> bool:
    """Start the peaks afresh; True when the process RSS peak could be reset too."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    try:
        (proc / "clear_refs").write_text("5")
    except OSError:
        return False
    return True


def read_peaks(device: torch.device, rss_reset: bool, proc: Path = _PROC) -> MemoryReport:
    allocated = reserved = None
    reason = None
    if device.type == "cuda":
        allocated = torch.cuda.max_memory_allocated(device)
        reserved = torch.cuda.max_memory_reserved(device)
    else:
        reason = f"PyTorch tracks no peak device memory for {device.type}; see the process peak RSS"
    return MemoryReport(
        device_peak_allocated_bytes=allocated,
        device_peak_reserved_bytes=reserved,
        process_peak_rss_bytes=peak_rss_bytes(proc),
        rss_scope="run" if rss_reset else "process",
        reason=reason,
    )


def current_bytes(device: torch.device, proc: Path = _PROC) -> tuple[int | None, int | None]:
    """(device bytes allocated now, process RSS now) for per-interval records."""
    allocated = torch.cuda.memory_allocated(device) if device.type == "cuda" else None
    return allocated, _status_kib(proc, "VmRSS")


def peak_rss_bytes(proc: Path = _PROC) -> int | None:
    peak = _status_kib(proc, "VmHWM")
    if peak is not None:
        return peak
    # Not Linux: getrusage's high-water mark, in KiB on Linux but bytes on macOS
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss if sys.platform == "darwin" else maxrss * 1024


def _status_kib(proc: Path, key: str) -> int | None:
    """A 'Key:   1234 kB' line of /proc/self/status, in bytes."""
    try:
        text = (proc / "status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return None


# share of the memory the machine has available that a CPU batch-size trial may take
HOST_TRIAL_SHARE = 0.9


@contextlib.contextmanager
def host_memory_cap(device: torch.device, proc: Path = _PROC) -> Iterator[int | None]:
    """While it is open, a CPU trial step cannot take more host memory than the machine has
    available: the process's data limit (RLIMIT_DATA, which since Linux 4.7 counts anonymous
    mappings, where PyTorch's CPU tensors live) is set to what it uses now plus HOST_TRIAL_SHARE of
    the available memory, so an allocation past it fails at once with the CPU allocator's "can't
    allocate memory" (an out-of-memory a batch search halves on) instead of the kernel's
    out-of-memory killer ending the process. Yields the cap's headroom in bytes, or None where
    none was set (a GPU, no /proc, a limit already lower); the limit is restored on leaving."""
    import psutil

    used = _status_kib(proc, "VmData")
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    headroom = int(psutil.virtual_memory().available * HOST_TRIAL_SHARE)
    cap = None if used is None else used + headroom
    lower = cap is not None and (soft == resource.RLIM_INFINITY or cap < soft)
    if device.type != "cpu" or cap is None or not lower or (hard != resource.RLIM_INFINITY and cap > hard):
        yield None
        return
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    try:
        yield headroom
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
