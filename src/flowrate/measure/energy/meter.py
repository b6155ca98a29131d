"""What an energy meter gives and how it is driven: the reading, the meter protocol, the window."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

__all__ = [
    "METHOD_NVML_COUNTER",
    "METHOD_NVML_SAMPLED",
    "METHOD_RAPL",
    "Clock",
    "EnergyMeter",
    "EnergyReading",
    "UnavailableMeter",
    "Window",
]

METHOD_NVML_COUNTER = "nvml-energy-counter"
METHOD_NVML_SAMPLED = "nvml-power-sampled"
METHOD_RAPL = "rapl-powercap"

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


class Window:
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
        self._window = Window(clock)

    def start(self) -> None:
        self._window.open()

    def stop(self) -> EnergyReading:
        t0, t1 = self._window.close()
        return EnergyReading(None, t1 - t0, None, (), {}, reason=self.reason)
