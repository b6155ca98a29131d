"""Host memory a step frees: kept in the process for the next step, or released to the OS.

PyTorch's CPU allocator has no cache (CUDA's has): every tensor is a malloc, every free a free.
glibc's malloc serves a block of 32 MiB or more (less, after its dynamic threshold moves) with
its own mmap and unmaps it on free, and trims the heap's top once enough of it is free. On a CPU
run, each step's activations therefore land on fresh pages, and the kernel zeroes every page
the step first touches: page faults can take a large share of a CPU step (its matmul and
activation outputs, the logits), and keeping the memory makes such steps faster
(benchmarks/freed_memory.py; its figures in benchmarks/RESULTS.md).

flowrate keeps freed host memory by default, as PyTorch's own CPU launcher
(torch.backends.xeon.run_cpu) does by preloading jemalloc or tcmalloc with decay off: on glibc,
``mallopt`` turns off mmap for large blocks and trimming of the heap, so the heap grows to the
step's peak once and is reused after. The cost model prices steps so (flowrate.estimate).

What cannot be done is recorded, never hidden: another C library, or an allocator preloaded with
LD_PRELOAD, is left as it is. Keeping cannot be undone within a process (glibc's dynamic
threshold does not come back), so a release run after a keep run in the same process is refused.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform

from flowrate.config import FreedMemory
from flowrate.errors import ConfigError

# mallopt parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_NEVER_TRIM = 2**31 - 1  # an int: the largest free top the heap keeps before trimming
_PRELOADED = ("jemalloc", "tcmalloc", "mimalloc")


class _Process:
    kept = False  # whether this process has been set to keep


def preloaded_allocator() -> str | None:
    """The allocator LD_PRELOAD puts in front of the C library's, if any."""
    preload = os.environ.get("LD_PRELOAD", "")
    return next((name for name in _PRELOADED if name in preload), None)


@functools.cache  # platform.libc_ver() scans the interpreter's binary
def is_glibc() -> bool:
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def apply(setting: FreedMemory) -> str:
    """Set this process's allocator for ``setting``; returns what now holds (describe())."""
    if setting is FreedMemory.RELEASE:
        if _Process.kept:
            raise ConfigError(
                "freed_memory",
                "this process already keeps freed host memory (an earlier run in it asked for keep, "
                "which cannot be undone); measure release in a fresh process, e.g. `flowrate run "
                "--freed-memory release`",
            )
        return describe()
    if not _Process.kept and preloaded_allocator() is None and is_glibc():
        mallopt = ctypes.CDLL(None).mallopt
        _Process.kept = mallopt(_M_MMAP_MAX, 0) == 1 and mallopt(_M_TRIM_THRESHOLD, _NEVER_TRIM) == 1
    return describe()


def describe() -> str:
    """What this process's allocator does with freed host memory, for the run's environment."""
    preloaded = preloaded_allocator()
    if preloaded is not None:
        return f"as {preloaded} (LD_PRELOAD) does; flowrate leaves it"
    if _Process.kept:
        return "kept (glibc mallopt: no mmap for large blocks, no trimming)"
    if is_glibc():
        return "released (glibc's default: large blocks unmapped, the heap trimmed)"
    return f"as the C library does ({platform.system()}, not glibc: flowrate cannot keep it)"
