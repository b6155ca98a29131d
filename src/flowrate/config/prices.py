"""--prices FILE: the user's own prices, per machine, in a TOML file they keep.

    [[machine]]
    device_name = "NVIDIA H100 80GB HBM3"   # which machine: any keys of its fingerprint
    price_per_hour = 2.49                    # what it costs per hour (your price)
    energy_price_per_kwh = 0.12              # optional: what a kWh costs there

An entry names a machine by one or more keys of the fingerprint that groups a store's runs by
machine (flowrate.results.noise.machine: hostname, device_name, cpu_model, num_threads) and
gives at least one price. It prices a run whose fingerprint holds every key it names with the
same value; the first such entry in the file does. --price-per-hour and --energy-price, given,
win over the file's. flowrate keeps no price table: the prices are the user's.

A file that cannot be read, is not TOML, has another key, an entry without a machine key or a
price, or a price that is not a finite number above 0 is refused, naming the file and the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flowrate.config.toml_file import read_toml
from flowrate.errors import ConfigError

FIELD = "prices"
TABLE = "machine"
MACHINE_KEYS = ("hostname", "device_name", "cpu_model", "num_threads")
PRICE_KEYS = ("price_per_hour", "energy_price_per_kwh")


@dataclass(frozen=True)
class MachinePrice:
    """One entry: the machine's fingerprint keys it names, and its prices (None: not given)."""

    machine: tuple[tuple[str, str | int], ...]  # (key, value) in the file's order
    price_per_hour: float | None
    energy_price_per_kwh: float | None
    index: int  # 1-based, in the file's order

    def matches(self, fingerprint: Mapping[str, object]) -> bool:
        return all(fingerprint.get(key) == value for key, value in self.machine)

    def describe(self) -> str:
        """``machine 2 (device_name='…')``: the entry as the file has it."""
        keys = ", ".join(f"{key}={value!r}" for key, value in self.machine)
        return f"{TABLE} {self.index} ({keys})"


@dataclass(frozen=True)
class Prices:
    path: str
    machines: tuple[MachinePrice, ...]

    def for_machine(self, fingerprint: Mapping[str, object]) -> MachinePrice | None:
        """The first entry that names this machine, or None."""
        return next((m for m in self.machines if m.matches(fingerprint)), None)


def read_prices(path: str) -> Prices:
    """The file's entries; ConfigError("prices") naming the file and the key where it is wrong."""
    data = read_toml(path, FIELD)
    unknown = [key for key in data if key != TABLE]
    if unknown:
        raise ConfigError(FIELD, f"{path}: unknown key {unknown[0]!r}; give [[{TABLE}]] entries only")
    entries = data.get(TABLE, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(FIELD, f"{path}: {TABLE} must be [[{TABLE}]] tables")
    return Prices(path, tuple(_entry(path, n, entry) for n, entry in enumerate(entries, 1)))


def _entry(path: str, index: int, entry: dict[str, Any]) -> MachinePrice:
    where = f"{path}: {TABLE} {index}"
    for key in entry:
        if key not in MACHINE_KEYS and key not in PRICE_KEYS:
            valid = ", ".join((*MACHINE_KEYS, *PRICE_KEYS))
            raise ConfigError(FIELD, f"{where}: unknown key {key!r}; valid keys are {valid}")
    machine = tuple((k, _machine_value(where, k, v)) for k, v in entry.items() if k in MACHINE_KEYS)
    if not machine:
        raise ConfigError(FIELD, f"{where}: name the machine by {', '.join(MACHINE_KEYS)} (one or more)")
    prices = {key: _price(where, key, entry[key]) for key in PRICE_KEYS if key in entry}
    if not prices:
        raise ConfigError(FIELD, f"{where}: give {' or '.join(PRICE_KEYS)}")
    return MachinePrice(machine, prices.get("price_per_hour"), prices.get("energy_price_per_kwh"), index)


def _machine_value(where: str, key: str, value: object) -> str | int:
    wanted = int if key == "num_threads" else str
    if isinstance(value, bool) or not isinstance(value, wanted) or value == "":
        what = "an integer" if wanted is int else "a non-empty string"
        raise ConfigError(FIELD, f"{where}: {key} must be {what}, got {value!r}")
    return value


def _price(where: str, key: str, value: object) -> float:
    number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
    if not math.isfinite(number) or number <= 0:
        raise ConfigError(FIELD, f"{where}: {key} must be a finite number above 0, got {value!r}")
    return number


@dataclass(frozen=True)
class Chosen:
    """The prices a run is priced at: the flags', else its machine's entry's (None: no price)."""

    price_per_hour: float | None
    energy_price_per_kwh: float | None
    source: str | None  # the entry that gave a price: "FILE machine N (…)"; None: the flags alone
    note: str | None  # the file names no entry for this machine: said once, with the run


def choose(
    price_per_hour: float | None,
    energy_price_per_kwh: float | None,
    prices: Prices | None,
    fingerprint: Mapping[str, object],
) -> Chosen:
    """The flags' prices where given, the first entry naming ``fingerprint`` for the rest."""
    if prices is None or (price_per_hour is not None and energy_price_per_kwh is not None):
        return Chosen(price_per_hour, energy_price_per_kwh, None, None)
    entry = prices.for_machine(fingerprint)
    if entry is None:
        keys = ", ".join(f"{key}={fingerprint.get(key)!r}" for key in MACHINE_KEYS)
        note = f"--prices {prices.path}: no entry names this machine ({keys}); not priced by the file"
        return Chosen(price_per_hour, energy_price_per_kwh, None, note)
    hour = price_per_hour if price_per_hour is not None else entry.price_per_hour
    kwh = energy_price_per_kwh if energy_price_per_kwh is not None else entry.energy_price_per_kwh
    took = (price_per_hour is None and hour is not None) or (energy_price_per_kwh is None and kwh is not None)
    return Chosen(hour, kwh, f"{prices.path} {entry.describe()}" if took else None, None)
