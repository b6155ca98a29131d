"""Device resolution and synchronization: the only places flowrate waits for the device."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from typing import Any

import torch

from flowrate.config import AUTO
from flowrate.errors import ConfigError


def resolve_device(name: str) -> torch.device:
    """'auto' is cuda when a CUDA device is present, else cpu; a named cuda device must exist."""
    if name == AUTO:  # cuda with its index: some CUDA APIs refuse a device without one
        return (
            torch.device("cuda", torch.cuda.current_device())
            if torch.cuda.is_available()
            else torch.device("cpu")
        )
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(
                "device",
                f"{name} asked for, but this PyTorch sees no CUDA device; use --device cpu",
            )
        index = device.index or 0
        count = torch.cuda.device_count()
        if index >= count:
            raise ConfigError("device", f"{name} asked for, but only {count} CUDA device(s) are visible")
        return torch.device("cuda", index)
    return device


def synchronizer(device: torch.device) -> Callable[[], None]:
    """A function that returns once all queued work on ``device`` has finished."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None  # CPU ops run synchronously in the calling thread


def is_out_of_memory(error: BaseException) -> bool:
    """True for CUDA OOM and for the CPU allocator's failure to allocate."""
    if isinstance(error, torch.OutOfMemoryError | MemoryError):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


def release_memory(device: torch.device) -> None:
    """Give cached blocks back after an out-of-memory failure so a smaller attempt can fit."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def local_capacity(device: torch.device) -> float | None:
    """Device memory in bytes: the GPU's, or the host's RAM for the CPU."""
    if device.type == "cuda":
        return float(torch.cuda.get_device_properties(device).total_memory)
    return host_memory()


def host_memory() -> float | None:
    """The host's total RAM in bytes (psutil), or None where it cannot be read."""
    import psutil

    try:
        return float(psutil.virtual_memory().total)
    except (OSError, RuntimeError):
        return None


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """PyTorch's CPU thread count set to ``threads`` while open (None keeps PyTorch's choice), and
    what it was put back after: the one save and restore every run, generation, session and
    calibration uses for --threads."""
    saved = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


@contextlib.contextmanager
def on_device(
    device: torch.device, memory_fraction: float | None = None, cuda: Any = torch.cuda
) -> Iterator[None]:
    """A run on ``device``: a CUDA device made the current one (argument-less events, streams and
    ``synchronize()`` act on it, not on cuda:0) and, with ``memory_fraction`` (--device-memory-limit),
    this process's share of its memory capped; both put back as they were after, so that a later
    run in the same process starts uncapped on the device it chose. ``cuda``: torch.cuda (a fake
    in tests)."""
    if device.type != "cuda":
        yield
        return
    saved_device = cuda.current_device()
    cuda.set_device(device)
    saved_fraction = None
    try:
        if memory_fraction is not None:
            saved_fraction = cuda.get_per_process_memory_fraction(device)
            # what an earlier run in this process left (tensors in reference cycles not yet
            # collected, blocks the caching allocator kept) would count against the cap
            gc.collect()
            cuda.empty_cache()
            cuda.set_per_process_memory_fraction(memory_fraction, device)
        yield
    finally:
        if saved_fraction is not None:
            cuda.set_per_process_memory_fraction(saved_fraction, device)
        cuda.set_device(saved_device)
