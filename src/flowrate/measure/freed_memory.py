"""Host memory a step frees: released to the OS as the C library does, or kept for the next step.

PyTorch's CPU allocator has no cache (CUDA's has): every tensor is a malloc, every free a free.
glibc's malloc serves a block of 32 MiB or more (less, after its dynamic threshold moves) with
its own mmap and unmaps it on free, and trims the heap's top once enough of it is free. On a CPU
run, each step's activations therefore land on fresh pages, and the kernel zeroes every page
the step first touches: page faults can take a large share of a CPU step (its matmul and
activation outputs, the logits), and keeping the memory can make such steps faster
(benchmarks/freed_memory.py measures by how much).

By default flowrate leaves the C library's policy as it is (``release``): its figures are what a
plain PyTorch process of the user's gets. Keeping is advice with its measured gain, as a tool
advises jemalloc or tcmalloc: ``--freed-memory keep`` measures under it, as PyTorch's own CPU
launcher (torch.backends.xeon.run_cpu) runs by preloading one of those with decay off. On glibc,
``mallopt`` turns off mmap for large blocks and trimming of the heap, so the heap grows to the
step's peak once and is reused after; the run's environment records which policy held.

What cannot be done is recorded, never hidden: another C library, or an allocator preloaded with
LD_PRELOAD, is left as it is. Keeping cannot be undone within a process (glibc's dynamic
threshold does not come back). A release run in a process an earlier run set to keep (a library
user's second ``flowrate.benchmark`` call, a test suite) is not refused: refusing would make one
keep run break every later default run of the process. It runs, its environment says "kept (an
earlier run in this process kept it …)" — what its figures were measured under — and apply()
returns a warning for the run's record that says how to measure release: a fresh process.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform

from flowrate.config import FreedMemory

# mallopt parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_NEVER_TRIM = 2**31 - 1  # an int: the largest free top the heap keeps before trimming
_PRELOADED = ("jemalloc", "tcmalloc", "mimalloc")

KEPT = "kept (glibc mallopt: no mmap for large blocks, no trimming)"
KEPT_EARLIER = (
    "kept (an earlier run in this process kept it: glibc mallopt, no mmap for large blocks, no trimming)"
)
RELEASED = "released (glibc's default: large blocks unmapped, the heap trimmed)"
KEPT_EARLIER_WARNING = (
    "freed host memory was kept, not released as asked: an earlier run in this process kept it "
    "(--freed-memory keep), which cannot be undone; measure release in a fresh process"
)


class _Process:
    kept = False  # whether this process has been set to keep
    asked = FreedMemory.RELEASE  # what the latest run asked for


def preloaded_allocator() -> str | None:
    """The allocator LD_PRELOAD puts in front of the C library's, if any."""
    preload = os.environ.get("LD_PRELOAD", "")
    return next((name for name in _PRELOADED if name in preload), None)


@functools.cache  # platform.libc_ver() scans the interpreter's binary
def is_glibc() -> bool:
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def apply(setting: FreedMemory) -> str | None:
    """Set this process's allocator for ``setting`` (describe() then says what holds). Returns a
    warning for the run's record when the setting could not take effect: release asked in a
    process an earlier run set to keep."""
    _Process.asked = setting
    if setting is FreedMemory.RELEASE:
        return KEPT_EARLIER_WARNING if _Process.kept else None
    if not _Process.kept and preloaded_allocator() is None and is_glibc():
        mallopt = ctypes.CDLL(None).mallopt
        _Process.kept = mallopt(_M_MMAP_MAX, 0) == 1 and mallopt(_M_TRIM_THRESHOLD, _NEVER_TRIM) == 1
    return None


def describe() -> str:
    """What this process's allocator does with freed host memory, for the run's environment."""
    preloaded = preloaded_allocator()
    if preloaded is not None:
        return f"as {preloaded} (LD_PRELOAD) does; flowrate leaves it"
    if _Process.kept:
        return KEPT_EARLIER if _Process.asked is FreedMemory.RELEASE else KEPT
    if is_glibc():
        return RELEASED
    return f"as the C library does ({platform.system()}, not glibc: flowrate cannot keep it)"


KEEP_ADVICE = (
    "`--freed-memory keep` may raise samples/s on CPU (the step's freed memory is reused instead "
    "of refaulted; benchmarks/freed_memory.py measures it)"
)


def label(asked: str | None, said: str | None, device_type: str | None) -> str | None:
    """A run's freed-memory line for people, from its record: the policy it asked for (config),
    what held (environment) and its device. Kept is always labelled; released is labelled, with
    the advice to try keep, only on a CPU (a CUDA step's tensors are the caching allocator's) and
    only where glibc released it; None where there is nothing to say."""
    if said is None:
        return None  # a record from before the setting
    if said.startswith("kept"):
        if said == KEPT_EARLIER or asked == FreedMemory.RELEASE:
            return "freed memory kept (an earlier run in this process kept it; release needs a fresh process)"
        return "freed memory kept (--freed-memory keep)"
    if said.startswith("released"):
        advised = device_type == "cpu"
        return f"freed memory released (the C library's default); {KEEP_ADVICE}" if advised else None
    return f"freed memory {said}" if asked == FreedMemory.KEEP or "LD_PRELOAD" in said else None
