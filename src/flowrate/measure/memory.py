"""Memory: the device's peak allocated and reserved bytes, and the process's peak resident set.

Device peaks come from PyTorch's caching allocator (``torch.cuda.max_memory_*``), reset when the
run starts so they belong to this run. The process peak RSS is the kernel's high-water mark
(VmHWM); on Linux writing "5" to /proc/self/clear_refs resets it, so it too covers this run only.
Where it cannot be reset, the figure covers the whole process life and says so.
"""

from __future__ import annotations

import resource
import sys
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
