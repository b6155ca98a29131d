"""CPU energy through Intel (or AMD) RAPL counters in powercap: package and DRAM domains.

The counters are read at start, stop and every power_watts(), accumulating per domain, and their
wrap-around is handled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from flowrate.measure.energy.meter import (
    METHOD_RAPL,
    Clock,
    EnergyMeter,
    EnergyReading,
    UnavailableMeter,
    Window,
)

# A power no RAPL domain reaches: a gap between reads longer than the wrap time at this power could
# hide a second wrap, which no reading can detect.
_WRAP_CHECK_WATTS = 1000.0

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
        self._window = Window(clock)
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


def open_rapl(root: Path, clock: Clock) -> EnergyMeter:
    """A meter over the readable RAPL domains under ``root``, else an unavailable one saying why."""
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
