"""Energy over the timed window, for samples per joule.

The runner calls ``sync(); meter.start()`` just after the throughput clock starts and
``sync(); reading = meter.stop()`` when the window ends; :meth:`EnergyMeter.power_watts` may be
called at each sample point. Methods, best first:

- CUDA: NVML's cumulative energy counter (millijoules, Volta and newer), read at both ends.
- CUDA without that counter: NVML power sampled by a background thread and integrated. NVML power
  is a ~1 s average on Ampere and newer, so this is approximate and says so.
- CPU: Intel RAPL through powercap (package and DRAM domains), handling counter wrap-around.

Where no method works, or a counter fails mid-window, the reading has ``joules=None`` and a
one-line reason: a missing energy figure must never cost the measurement it accompanies.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import torch

__all__ = [
    "METHOD_NVML_COUNTER",
    "METHOD_NVML_SAMPLED",
    "METHOD_RAPL",
    "EnergyMeter",
    "EnergyReading",
    "open_energy_meter",
]

METHOD_NVML_COUNTER = "nvml-energy-counter"
METHOD_NVML_SAMPLED = "nvml-power-sampled"
METHOD_RAPL = "rapl-powercap"

DEFAULT_SAMPLE_PERIOD_S = 0.1
# NVML's energy counter updates every 20–100 ms: below this window the error can reach several %.
_SHORT_WINDOW_S = 1.0
_COUNTER_UPDATE_S = 0.1
# A power no RAPL domain reaches: a gap between reads longer than the wrap time at this power could
# hide a second wrap, which no reading can detect.
_WRAP_CHECK_WATTS = 1000.0

Clock = Callable[[], float]


@dataclass(frozen=True)
class EnergyReading:
    """Energy over one metered window, with what produced it and what it covers."""

    joules: float | None  # total over the domains; None with a reason
    seconds: float  # the metered window, on the meter's own clock
    method: str | None  # METHOD_*; None when no method was available
    domains: tuple[str, ...]  # what the joules cover
    per_domain_joules: dict[str, float]
    reason: str | None = None  # why joules is None
    caveats: tuple[str, ...] = ()

    @property
    def average_watts(self) -> float | None:
        if self.joules is None or self.seconds <= 0:
            return None
        return self.joules / self.seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            "joules": self.joules,
            "seconds": self.seconds,
            "average_watts": self.average_watts,
            "method": self.method,
            "domains": list(self.domains),
            "per_domain_joules": dict(self.per_domain_joules),
            "reason": self.reason,
            "caveats": list(self.caveats),
        }


class EnergyMeter(ABC):
    """Meters one window at a time: start(), stop(), repeatable; close() when done."""

    method: str | None = None

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def stop(self) -> EnergyReading: ...

    def power_watts(self) -> float | None:
        """Power now (or since the last call), in watts; None when unknown."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook, most meters hold nothing
        """Stop background threads and release the library; the meter is unusable afterwards."""

    def __enter__(self) -> EnergyMeter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class _Window:
    """The start time of a window on the meter's clock; stop() before start() is a caller bug."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.t0: float | None = None

    def open(self) -> float:
        self.t0 = self._clock()
        return self.t0

    def close(self) -> tuple[float, float]:
        if self.t0 is None:
            raise RuntimeError("EnergyMeter.stop() before start()")
        t0, self.t0 = self.t0, None
        return t0, self._clock()


class UnavailableMeter(EnergyMeter):
    """No method works here: every reading is empty and says why."""

    def __init__(self, reason: str, clock: Clock = time.perf_counter) -> None:
        self.reason = reason
        self._window = _Window(clock)

    def start(self) -> None:
        self._window.open()

    def stop(self) -> EnergyReading:
        t0, t1 = self._window.close()
        return EnergyReading(None, t1 - t0, None, (), {}, reason=self.reason)


# --- NVML -------------------------------------------------------------------------------------


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
        self._window = _Window(clock)
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
            error_pct = min(100.0, 100.0 * _COUNTER_UPDATE_S / seconds) if seconds > 0 else 100.0
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


def _open_nvml(
    device: torch.device, module: Any | None, clock: Clock, sample_period_s: float | None
) -> EnergyMeter:
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
        try:
            domain = f"gpu{index} ({_text(nvml.nvmlDeviceGetName(handle))})"
        except nvml.NVMLError:
            domain = f"gpu{index}"
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


def _shutdown_quietly(nvml: Any) -> None:
    with contextlib.suppress(nvml.NVMLError):  # the driver went away: nothing left to release
        nvml.nvmlShutdown()


# --- RAPL -------------------------------------------------------------------------------------

# Top-level zones are packages (or psys, which overlaps them); subzones are core/uncore (inside the
# package) and dram (outside it). intel-rapl-mmio duplicates the package zone and is not matched.
_RAPL_ZONE = re.compile(r"^(?:intel|amd)-rapl:(\d+)$")
_RAPL_SUBZONE = re.compile(r"^(?:intel|amd)-rapl:(\d+):(\d+)$")


def _read_counter(path: Path) -> int:
    """One integer sysfs file; tests replace this to simulate unreadable counters."""
    return int(path.read_text().strip())


@dataclass
class _RaplDomain:
    label: str
    energy_path: Path
    max_range_uj: int | None
    last_uj: int = 0
    joules: float = 0.0


def _find_rapl_domains(root: Path) -> list[_RaplDomain]:
    """Package domains and their DRAM subzones, in a stable order; never raises."""

    def name_of(zone: Path) -> str | None:
        try:
            return (zone / "name").read_text().strip()
        except OSError:
            return None

    def domain(zone: Path, label: str) -> _RaplDomain:
        try:
            max_range: int | None = _read_counter(zone / "max_energy_range_uj")
        except (OSError, ValueError):
            max_range = None
        return _RaplDomain(label, zone / "energy_uj", max_range)

    try:
        entries = sorted(root.iterdir(), key=lambda p: p.name)
    except OSError:
        return []
    packages: dict[str, str] = {}  # zone index -> package number, e.g. "0" -> "0"
    found: list[_RaplDomain] = []
    for zone in entries:
        match = _RAPL_ZONE.match(zone.name)
        name = name_of(zone) if match else None
        if match and name and name.startswith("package-"):
            packages[match.group(1)] = name.removeprefix("package-")
            found.append(domain(zone, name))
    for zone in entries:
        match = _RAPL_SUBZONE.match(zone.name)
        if match and match.group(1) in packages and name_of(zone) == "dram":
            found.append(domain(zone, f"dram-{packages[match.group(1)]}"))
    return found


class RaplMeter(EnergyMeter):
    """RAPL energy counters read at start, stop and every power_watts(), accumulating per domain.

    Reading in between shortens the gaps a wrap-around must be resolved over: one wrap per gap is
    assumed, and a caveat says when a gap was long enough to hide a second one.
    """

    method = METHOD_RAPL

    def __init__(self, domains: list[_RaplDomain], caveats: tuple[str, ...], clock: Clock) -> None:
        self._domains = domains
        self._caveats = caveats
        self._clock = clock
        self._window = _Window(clock)
        self._error: str | None = None
        self._last_t = 0.0
        self._power_mark: tuple[float, float] | None = None  # (time, total joules) at the last power read
        self._wrap_caveats: list[str] = []

    @property
    def domains(self) -> tuple[str, ...]:
        return tuple(d.label for d in self._domains)

    def _read_all(self) -> list[int] | None:
        try:
            return [_read_counter(d.energy_path) for d in self._domains]
        except (OSError, ValueError) as exc:
            self._error = self._error or f"RAPL energy counter unreadable during the window: {exc}"
            return None

    def start(self) -> None:
        self._error, self._wrap_caveats = None, []
        t0 = self._window.open()
        values = self._read_all()
        for d, value in zip(self._domains, values or [0] * len(self._domains), strict=True):
            d.last_uj, d.joules = value, 0.0
        self._last_t = t0
        self._power_mark = (t0, 0.0)

    def _advance(self) -> float:
        """Read every counter and add what each gained since the last read; returns the time."""
        values = self._read_all() if self._error is None else None
        now = self._clock()
        if values is None:
            return now
        gap = now - self._last_t
        for d, value in zip(self._domains, values, strict=True):
            delta = value - d.last_uj
            if delta < 0:
                if d.max_range_uj is None:
                    self._error = (
                        f"RAPL counter {d.energy_path} wrapped and max_energy_range_uj is unreadable"
                    )
                    return now
                delta += d.max_range_uj
            if d.max_range_uj is not None:
                wrap_s = d.max_range_uj / 1e6 / _WRAP_CHECK_WATTS
                if gap > wrap_s and not any(c.startswith(f"{d.label}:") for c in self._wrap_caveats):
                    self._wrap_caveats.append(
                        f"{d.label}: {gap:.0f} s between counter reads exceeds the {wrap_s:.0f} s its "
                        f"counter takes to wrap at {_WRAP_CHECK_WATTS:.0f} W; a second wrap would go unseen"
                    )
            d.last_uj = value
            d.joules += delta / 1e6
        self._last_t = now
        return now

    def power_watts(self) -> float | None:
        if self._window.t0 is None or self._power_mark is None:
            return None
        now = self._advance()
        if self._error is not None:
            return None
        total = sum(d.joules for d in self._domains)
        t_mark, j_mark = self._power_mark
        self._power_mark = (now, total)
        return (total - j_mark) / (now - t_mark) if now > t_mark else None

    def stop(self) -> EnergyReading:
        if self._window.t0 is not None:
            self._advance()
        t0, t1 = self._window.close()
        self._power_mark = None
        seconds = t1 - t0
        caveats = (*self._caveats, *self._wrap_caveats)
        if self._error is not None:
            return EnergyReading(None, seconds, self.method, self.domains, {}, self._error, caveats)
        per_domain = {d.label: d.joules for d in self._domains}
        return EnergyReading(
            sum(per_domain.values()), seconds, self.method, self.domains, per_domain, None, caveats
        )


def _open_rapl(root: Path, clock: Clock) -> EnergyMeter:
    domains = _find_rapl_domains(root)
    if not domains:
        return UnavailableMeter(
            f"no energy counter: {root} has no RAPL zones (common in VMs and containers)", clock
        )
    readable: list[_RaplDomain] = []
    denied: list[str] = []
    broken: list[str] = []
    for d in domains:
        try:
            _read_counter(d.energy_path)
            readable.append(d)
        except PermissionError:
            denied.append(d.label)
        except (OSError, ValueError) as exc:
            broken.append(f"{d.label} ({exc})")
    if not readable:
        if denied:
            return UnavailableMeter(
                f"RAPL energy counters at {root} are not readable by this user: run as root or make "
                f"energy_uj readable (sudo chmod a+r {root}/*-rapl:*/energy_uj)",
                clock,
            )
        return UnavailableMeter(f"RAPL energy counters at {root} are unreadable: {'; '.join(broken)}", clock)
    caveats: tuple[str, ...] = ()
    if denied or broken:
        left_out = denied + broken
        caveats += (f"RAPL domains left out as unreadable: {', '.join(left_out)}",)
    return RaplMeter(readable, caveats, clock)


# --- Entry point ------------------------------------------------------------------------------


def open_energy_meter(
    device: torch.device,
    *,
    nvml: Any | None = None,
    powercap_root: Path = Path("/sys/class/powercap"),
    clock: Clock = time.perf_counter,
    sample_period_s: float | None = DEFAULT_SAMPLE_PERIOD_S,
) -> EnergyMeter:
    """The best energy meter for ``device``; never raises, and says why where none works.

    ``nvml`` is the pynvml module (imported lazily when None); ``sample_period_s`` is the power
    sampling period of the NVML fallback, None for no thread (call ``sample()`` yourself).
    """
    if device.type == "cuda":
        return _open_nvml(device, nvml, clock, sample_period_s)
    if device.type == "cpu":
        return _open_rapl(powercap_root, clock)
    return UnavailableMeter(f"no energy counter for {device.type} devices", clock)
