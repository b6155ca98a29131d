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

The package: ``meter`` (the reading and the meter protocol), ``nvml`` and ``rapl`` (the methods);
this module picks one.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from flowrate.measure.energy.meter import (
    METHOD_NVML_COUNTER,
    METHOD_NVML_SAMPLED,
    METHOD_RAPL,
    Clock,
    EnergyMeter,
    EnergyReading,
    UnavailableMeter,
)
from flowrate.measure.energy.nvml import DEFAULT_SAMPLE_PERIOD_S, open_nvml
from flowrate.measure.energy.rapl import open_rapl

__all__ = [
    "METHOD_NVML_COUNTER",
    "METHOD_NVML_SAMPLED",
    "METHOD_RAPL",
    "EnergyMeter",
    "EnergyReading",
    "open_energy_meter",
]


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
        return open_nvml(device, nvml, clock, sample_period_s)
    if device.type == "cpu":
        return open_rapl(powercap_root, clock)
    return UnavailableMeter(f"no energy counter for {device.type} devices", clock)
