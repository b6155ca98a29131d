"""GPU energy through NVML: its cumulative energy counter, else its power sampled and integrated."""

from __future__ import annotations

import contextlib
import itertools
import threading
from typing import Any

import torch

from flowrate.measure.energy.meter import (
    METHOD_NVML_COUNTER,
    METHOD_NVML_SAMPLED,
    Clock,
    EnergyMeter,
    EnergyReading,
    UnavailableMeter,
    Window,
)

DEFAULT_SAMPLE_PERIOD_S = 0.1
# NVML's energy counter updates every 20–100 ms: below this window the error can reach several %.
_SHORT_WINDOW_S = 1.0
_COUNTER_UPDATE_S = 0.1


def counter_error(seconds: float) -> float:
    """The most NVML's energy counter may misstate a window of ``seconds``, relative (1.0: all of
    it): one update period over the window."""
    return min(1.0, _COUNTER_UPDATE_S / seconds) if seconds > 0 else 1.0


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class _NvmlMeter(EnergyMeter):
    """Shared by both NVML methods: the handle, its label, and the nvmlShutdown owed."""

    def __init__(self, nvml: Any, handle: Any, domain: str, caveats: tuple[str, ...], clock: Clock) -> None:
        self._nvml = nvml
        self._handle = handle
        self.domain = domain
        self._caveats = caveats
        self._clock = clock
        self._window = Window(clock)
        self._closed = False

    def power_watts(self) -> float | None:
        if self._closed:
            return None
        try:
            return float(self._nvml.nvmlDeviceGetPowerUsage(self._handle)) / 1000.0
        except self._nvml.NVMLError:
            return None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        _shutdown_quietly(self._nvml)

    def _failed(self, seconds: float, reason: str) -> EnergyReading:
        return EnergyReading(None, seconds, self.method, (self.domain,), {}, reason, self._caveats)


class NvmlCounterMeter(_NvmlMeter):
    """NVML's cumulative energy counter read at both ends; never integrates power."""

    method = METHOD_NVML_COUNTER

    def __init__(self, nvml: Any, handle: Any, domain: str, caveats: tuple[str, ...], clock: Clock) -> None:
        super().__init__(nvml, handle, domain, caveats, clock)
        self._start_mj: int | None = None
        self._start_error: str | None = None

    def _read_mj(self) -> int:
        return int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))

    def start(self) -> None:
        self._window.open()
        try:
            self._start_mj, self._start_error = self._read_mj(), None
        except self._nvml.NVMLError as exc:
            self._start_mj, self._start_error = None, f"NVML energy counter unreadable at start: {exc}"

    def stop(self) -> EnergyReading:
        try:
            end_mj: int | None = self._read_mj()
            end_error = None
        except self._nvml.NVMLError as exc:
            end_mj, end_error = None, f"NVML energy counter unreadable at stop: {exc}"
        t0, t1 = self._window.close()
        seconds = t1 - t0
        if self._start_mj is None or end_mj is None:
            return self._failed(seconds, self._start_error or end_error or "NVML energy counter unread")
        if end_mj < self._start_mj:  # only a driver reload resets it
            return self._failed(seconds, "NVML energy counter went backwards (driver reloaded?)")
        joules = (end_mj - self._start_mj) / 1000.0
        caveats = self._caveats
        if seconds < _SHORT_WINDOW_S:
            error_pct = 100.0 * counter_error(seconds)
            caveats += (
                f"window of {seconds:.3g} s is under {_SHORT_WINDOW_S:g} s: NVML's energy counter updates "
                f"every 20–100 ms, so the figure may be off by up to {error_pct:.0f}%",
            )
        return EnergyReading(
            joules, seconds, self.method, (self.domain,), {self.domain: joules}, None, caveats
        )


class NvmlSampledMeter(_NvmlMeter):
    """NVML power sampled at a fixed period and integrated (trapezoid) over the window.

    With ``sample_period_s=None`` no thread runs and the caller drives :meth:`sample` itself.
    """

    method = METHOD_NVML_SAMPLED

    def __init__(
        self,
        nvml: Any,
        handle: Any,
        domain: str,
        caveats: tuple[str, ...],
        clock: Clock,
        sample_period_s: float | None = DEFAULT_SAMPLE_PERIOD_S,
    ) -> None:
        super().__init__(nvml, handle, domain, caveats, clock)
        if sample_period_s is not None and sample_period_s <= 0:
            raise ValueError(f"sample_period_s must be positive, got {sample_period_s}")
        self.sample_period_s = sample_period_s
        self._lock = threading.Lock()
        self._samples: list[tuple[float, float]] = []  # (clock seconds, watts)
        self._missed = 0
        self._running = False
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        """Take one power sample into the current window (what the background thread calls)."""
        self._append(self.power_watts(), None)

    def _append(self, watts: float | None, at: float | None) -> None:
        with self._lock:
            if not self._running:
                return
            if watts is None:
                self._missed += 1
            else:
                self._samples.append((self._clock() if at is None else at, watts))

    def _run(self) -> None:
        assert self.sample_period_s is not None
        while not self._halt.wait(self.sample_period_s):
            self.sample()

    def start(self) -> None:
        self._stop_thread()
        watts = self.power_watts()
        with self._lock:
            self._samples, self._missed, self._running = [], 0, True
        # The window's first point sits exactly at its start, so the integral spans the whole window.
        self._append(watts, self._window.open())
        if self.sample_period_s is not None:
            self._halt.clear()
            self._thread = threading.Thread(target=self._run, name="flowrate-power-sampler", daemon=True)
            self._thread.start()

    def stop(self) -> EnergyReading:
        self._stop_thread()
        watts = self.power_watts()
        t0, t1 = self._window.close()
        self._append(watts, t1)  # and its last point exactly at its end
        with self._lock:
            self._running = False
            samples, missed = self._samples, self._missed
        seconds = t1 - t0
        if len(samples) < 2:
            return self._failed(seconds, f"NVML power readable at only {len(samples)} point(s) in the window")
        joules = sum((tb - ta) * (pa + pb) / 2.0 for (ta, pa), (tb, pb) in itertools.pairwise(samples))
        caveats = (
            *self._caveats,
            f"integrated from {len(samples)} NVML power samples; NVML power is a ~1 s average on Ampere "
            "and newer, so the figure is approximate",
        )
        if missed:
            caveats += (f"{missed} power sample(s) failed and were skipped",)
        return EnergyReading(
            joules, seconds, self.method, (self.domain,), {self.domain: joules}, None, caveats
        )

    def _stop_thread(self) -> None:
        if self._thread is not None:
            self._halt.set()
            self._thread.join()
            self._thread = None

    def close(self) -> None:
        self._stop_thread()
        with self._lock:
            self._running = False
        super().close()


def _cuda_pci_bus_id(index: int) -> str | None:
    """The GPU's PCI address as NVML spells it, or None where this PyTorch does not report one."""
    try:
        props = torch.cuda.get_device_properties(index)
        # Not in every PyTorch's stubs, nor in older releases' properties.
        domain, bus, dev = (getattr(props, f"pci_{part}_id") for part in ("domain", "bus", "device"))
    except (AttributeError, RuntimeError, AssertionError, ValueError):
        return None
    return f"{int(domain):08X}:{int(bus):02X}:{int(dev):02X}.0"


def _import_pynvml() -> Any | None:
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def open_nvml(
    device: torch.device, module: Any | None, clock: Clock, sample_period_s: float | None
) -> EnergyMeter:
    """The counter meter for ``device``, else the sampled one, else an unavailable one saying why."""
    nvml: Any = module if module is not None else _import_pynvml()
    if nvml is None:
        return UnavailableMeter("nvidia-ml-py is not installed: pip install 'flowrate[gpu]'", clock)
    try:
        nvml.nvmlInit()
    except (nvml.NVMLError, OSError) as exc:
        return UnavailableMeter(
            f"no energy counter: nvmlInit failed ({exc}); is the NVIDIA driver loaded?", clock
        )

    index = device.index
    if index is None:
        try:
            index = torch.cuda.current_device()
        except (RuntimeError, AssertionError):
            index = 0
    caveats: tuple[str, ...] = ()
    try:
        # torch numbers only the visible GPUs, in its own order; NVML numbers all of them in PCI order.
        pci = _cuda_pci_bus_id(index)
        handle = None
        if pci is not None:
            with contextlib.suppress(nvml.NVMLError):  # fall back to the index below
                handle = nvml.nvmlDeviceGetHandleByPciBusId(pci)
        if handle is None:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            caveats += (
                f"NVML device found by index {index}, not PCI bus id: under CUDA_VISIBLE_DEVICES or "
                "CUDA_DEVICE_ORDER it may be another GPU",
            )
        domain = _domain(nvml, handle, index)
    except nvml.NVMLError as exc:
        _shutdown_quietly(nvml)
        return UnavailableMeter(f"no energy counter: NVML has no device for cuda:{index} ({exc})", clock)

    try:
        nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        return NvmlCounterMeter(nvml, handle, domain, caveats, clock)
    except nvml.NVMLError as counter_exc:  # NotSupported before Volta; FunctionNotFound on old drivers
        counter_error = counter_exc
    try:
        nvml.nvmlDeviceGetPowerUsage(handle)
    except nvml.NVMLError as power_exc:
        _shutdown_quietly(nvml)
        return UnavailableMeter(
            f"no energy counter on {domain}: NVML energy counter ({counter_error}) and power reading "
            f"({power_exc}) both unavailable",
            clock,
        )
    caveats += (f"NVML energy counter unavailable ({counter_error}): power sampled and integrated",)
    return NvmlSampledMeter(nvml, handle, domain, caveats, clock, sample_period_s)


def _domain(nvml: Any, handle: Any, torch_index: int) -> str:
    """The GPU's name as the result's energy domain: by NVML's own index, which numbers every GPU
    of the host, not torch's, which numbers the visible ones (under a per-rank CUDA_VISIBLE_DEVICES
    every rank's is 0, and the ranks' meters would look like one to the merge)."""
    try:
        index = int(nvml.nvmlDeviceGetIndex(handle))
    except nvml.NVMLError:
        index = torch_index  # the same as NVML's where the handle was found by index
    try:
        return f"gpu{index} ({_text(nvml.nvmlDeviceGetName(handle))})"
    except nvml.NVMLError:
        return f"gpu{index}"


def _shutdown_quietly(nvml: Any) -> None:
    with contextlib.suppress(nvml.NVMLError):  # the driver went away: nothing left to release
        nvml.nvmlShutdown()
