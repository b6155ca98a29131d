"""Datasheet peaks per device and precision: the denominator of MFU.

MFU = model FLOP/s ÷ the device's *dense* datasheet peak for the precision the run used. This module
and its table (peaks_table.py) are the one place those peaks live; every entry names its
datasheet (title and URL).

Dense, never sparse
    From Ampere on, NVIDIA datasheets print tensor-core figures "with sparsity" (2:4 structured
    sparsity), which are exactly 2x the dense figure (H100 SXM bf16: 1,979 sparse, 989.4 dense).
    Training and ordinary inference run dense GEMMs, so every number here is the dense one; a
    sparse figure would halve every MFU. Figures are per precision: ``fp32`` is the non-tensor-core
    FP32 rate (flowrate's fp32 policy turns TF32 off), ``tf32`` the TF32 tensor-core rate, and
    ``bf16``/``fp16`` the 16-bit tensor-core rate with FP32 accumulate. ``pure-bf16`` uses the
    ``bf16`` figure; ``fp8`` is the FP8 tensor-core rate (an fp8 run's), ``int8`` the INT8 one in
    TOPS (int8-dynamic's int8 x int8 GEMMs; int8-weights dequantizes into fp32 matmuls and uses
    ``fp32``). A key is absent where the device has no such units (V100 has no bf16 or TF32 tensor
    cores) or the table has not been given the figure; MFU is then empty with a reason that says
    the table lacks it, never computed against a stand-in.

Consumer cards: FP32 accumulate
    GeForce cards run FP16 tensor math at full rate only with FP16 accumulate; with FP32 accumulate
    (what cuBLAS uses for PyTorch's fp16 and bf16 matmuls) the rate is half. The table therefore
    lists the FP32-accumulate figure (RTX 4090: 165.2, not 330.3 TFLOP/s). NVIDIA's data-centre
    datasheets give both accumulate modes the same rate.

Adding an entry
    From Python, ``register_peak(DevicePeak(...))``; registered entries are searched first, the
    latest registration first, and ``unregister_peak`` / ``registered_peaks`` undo it. Without
    code, point ``FLOWRATE_PEAKS`` at a JSON file holding a list of objects with the
    ``DevicePeak`` fields, values in FLOP/s and bytes/s (not TFLOP/s)::

        [{"name": "Example X1", "match": ["example", "x1"],
          "dense_flops": {"fp32": 50e12, "bf16": 400e12}, "memory_bandwidth": 2.0e12,
          "host_link_bandwidth": 31.5e9, "source": "Example X1 datasheet, https://example.com/x1.pdf",
          "notes": "dense; sparse figures not used", "exclude": ["x1l"], "memory_capacity": 85899345920}]

    The file's entries are searched after registered ones and before the built-in table. A
    malformed file raises ``FlowrateError`` naming the file and the entry.

Matching
    Each string in ``match`` must occur in the lowercased device name (as returned by
    ``torch.cuda.get_device_name``) as a whole word, so "l4" does not match "NVIDIA L40S" and
    "a10" does not match "NVIDIA A100-SXM4-40GB"; any string in ``exclude`` that occurs rules the
    entry out ("H100 PCIe" and "H100 NVL" are not the SXM part). An unlisted variant (V100S,
    RTX 4090 D, A10G, GH200, H200 NVL) finds no entry rather than a near neighbour's figures.

CPUs have no entry, by design
    A CPU's peak depends on its sustained all-core clock under AVX load, its vector width
    (AVX2, AVX-512, AMX) and the number of FMA units per core, none of which the model name pins
    down. For CPUs the useful denominator is a measured peak: a large GEMM through the same
    library, reported beside (here: instead of) the datasheet MFU.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from flowrate.config import Precision
from flowrate.errors import FlowrateError
from flowrate.measure.peaks_table import DATASHEETS, Datasheet

__all__ = [
    "BUILTIN_PEAKS",
    "PEAKS_ENV",
    "PRECISION_KEYS",
    "DevicePeak",
    "PeakLookup",
    "find_device",
    "known_devices",
    "load_peak_file",
    "peak_for",
    "precision_key",
    "register_peak",
    "registered_peaks",
    "unregister_peak",
]

PRECISION_KEYS = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")
PEAKS_ENV = "FLOWRATE_PEAKS"

# Below these, a value was almost surely written in TFLOP/s or GB/s; real devices are far above.
_MIN_FLOPS = 1e9
_MIN_BANDWIDTH = 1e6

_DENSE = "Dense figures per precision; the datasheet's sparse (2:4) figures are 2x and never used."


def _whole_word(text: str, name: str) -> bool:
    """``text`` occurs in ``name`` with no letter or digit directly before or after it."""
    return re.search(rf"(?<![a-z0-9]){re.escape(text)}(?![a-z0-9])", name) is not None


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _words(value: object, field_name: str, fail: Callable[[str], FlowrateError]) -> tuple[str, ...]:
    """A ``match``/``exclude`` value as a tuple of lowercase strings."""
    if isinstance(value, str):  # a lone string, not a tuple of its characters
        value = (value,)
    if not isinstance(value, tuple | list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise fail(f"{field_name} must be a list of non-empty strings, got {value!r}")
    return tuple(v.strip().lower() for v in value)


@dataclass(frozen=True)
class DevicePeak:
    """One device's datasheet figures. Validated on construction; raises ``FlowrateError``."""

    name: str
    # Lowercase strings that must all occur, as whole words, in the lowercased device name.
    match: tuple[str, ...]
    # Precision key -> dense FLOP/s; an absent key: the table has no figure (no such units, or unwritten).
    dense_flops: Mapping[str, float]
    # Device memory, bytes/s.
    memory_bandwidth: float | None
    # Host<->device link, bytes/s per direction, theoretical.
    host_link_bandwidth: float | None
    # Datasheet title and URL.
    source: str
    notes: str = ""
    # Lowercase strings any one of which, occurring as a whole word, rules the entry out.
    exclude: tuple[str, ...] = ()
    # Device memory capacity, bytes (the datasheet's "80GB" of HBM is 80 GiB; PyTorch reports a
    # little less, what the driver keeps back: an H100 80GB shows 79.1 GiB). None: not stated.
    memory_capacity: float | None = None

    def __post_init__(self) -> None:
        def fail(problem: str) -> FlowrateError:
            return FlowrateError(f"peak entry {self.name!r}: {problem}")

        if not isinstance(self.name, str) or not self.name.strip():
            raise FlowrateError(f"peak entry {self.name!r}: name must be a non-empty string")
        object.__setattr__(self, "match", _words(self.match, "match", fail))
        if not self.match:
            raise fail("match must list at least one string")
        object.__setattr__(self, "exclude", _words(self.exclude, "exclude", fail))

        if not isinstance(self.dense_flops, Mapping):
            raise fail("dense_flops must map precision keys to FLOP/s")
        flops: dict[str, float] = {}
        for key, value in self.dense_flops.items():
            if key not in PRECISION_KEYS:
                raise fail(f"dense_flops key {key!r} is not one of {', '.join(PRECISION_KEYS)}")
            if not _is_number(value) or not math.isfinite(value) or value <= 0:
                raise fail(f"dense_flops[{key!r}] must be a positive number of FLOP/s, got {value!r}")
            if value < _MIN_FLOPS:
                raise fail(
                    f"dense_flops[{key!r}] = {value!r} looks like TFLOP/s; "
                    f"values are FLOP/s: write {value!r}e12"
                )
            flops[key] = float(value)
        # A private plain dict: the caller's mapping may change later, and dataclasses.asdict and
        # json can serialise a dict (a MappingProxyType would make asdict raise).
        object.__setattr__(self, "dense_flops", flops)

        for field_name in ("memory_bandwidth", "host_link_bandwidth", "memory_capacity"):
            value = getattr(self, field_name)
            if value is None:
                continue
            unit = "bytes" if field_name == "memory_capacity" else "bytes/s"
            if not _is_number(value) or not math.isfinite(value) or value <= 0:
                raise fail(f"{field_name} must be a positive number of {unit} or null, got {value!r}")
            if value < _MIN_BANDWIDTH:
                example = "80 GiB is 85899345920" if unit == "bytes" else "3.35 TB/s is 3.35e12"
                raise fail(f"{field_name} = {value!r} is too small; values are {unit} ({example})")
            object.__setattr__(self, field_name, float(value))

        if not isinstance(self.source, str) or not self.source.strip():
            raise fail("source must name the datasheet (title and URL)")
        if not isinstance(self.notes, str):
            raise fail("notes must be a string")

    def __hash__(self) -> int:
        # The generated hash would hash the dense_flops dict and raise; entries go in sets and caches.
        return hash((self.name, self.match, self.exclude, tuple(sorted(self.dense_flops.items()))))

    def matches(self, device_name: str) -> bool:
        """Whether ``device_name`` (any case) is this device."""
        name = device_name.lower()
        return all(_whole_word(m, name) for m in self.match) and not any(
            _whole_word(x, name) for x in self.exclude
        )


@dataclass(frozen=True)
class PeakLookup:
    """The answer for one device and precision; ``flops`` is None exactly when ``reason`` is set."""

    flops: float | None
    memory_bandwidth: float | None
    host_link_bandwidth: float | None
    entry: DevicePeak | None
    reason: str | None


def _entry(sheet: Datasheet) -> DevicePeak:
    """A built-in entry from its datasheet row: TFLOP/s, TB/s and GB turned into FLOP/s, bytes/s, bytes."""
    return DevicePeak(
        name=sheet.name,
        match=sheet.match,
        dense_flops={key: value * 1e12 for key, value in sheet.tflops.items()},
        memory_bandwidth=sheet.memory_tb_s * 1e12,
        host_link_bandwidth=sheet.host_link,
        source=sheet.source,
        notes=f"{_DENSE} {sheet.notes}",
        exclude=sheet.exclude,
        memory_capacity=sheet.memory_gb * 2**30 if sheet.memory_gb is not None else None,
    )


# Searched after user entries, in the table's order.
BUILTIN_PEAKS: tuple[DevicePeak, ...] = tuple(_entry(sheet) for sheet in DATASHEETS)


_registered: list[DevicePeak] = []


# Policies whose matmuls run in another format than their name: the table key of that format.
_COMPUTE_KEY = {Precision.PURE_BF16: "bf16", Precision.INT8_DYNAMIC: "int8", Precision.INT8_WEIGHTS: "fp32"}


def precision_key(precision: str) -> str:
    """The table key for a precision policy: the format its matmuls compute in (``pure-bf16`` ->
    ``bf16``, ``int8-dynamic`` -> ``int8``, ``int8-weights`` -> ``fp32``); the rest map to themselves.

    Accepts ``flowrate.config.Precision`` members and its aliases; raises ``ConfigError`` otherwise.
    """
    parsed = Precision.parse(precision)
    return _COMPUTE_KEY.get(parsed, parsed.value)


def register_peak(peak: DevicePeak) -> None:
    """Add an entry, searched before every other (the latest registration first)."""
    if not isinstance(peak, DevicePeak):
        raise FlowrateError(f"register_peak wants a DevicePeak, got {type(peak).__name__}")
    _registered.append(peak)


def unregister_peak(peak: DevicePeak) -> None:
    """Remove an entry added by ``register_peak``; removing one that is not there does nothing."""
    for i in range(len(_registered) - 1, -1, -1):
        if _registered[i] is peak:
            del _registered[i]
            return


@contextmanager
def registered_peaks(*peaks: DevicePeak) -> Iterator[None]:
    """Register ``peaks`` for the duration of a ``with`` block."""
    for peak in peaks:
        register_peak(peak)
    try:
        yield
    finally:
        for peak in peaks:
            unregister_peak(peak)


_JSON_TYPES = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
_REQUIRED = ("name", "match", "dense_flops", "source")
_OPTIONAL = ("memory_bandwidth", "host_link_bandwidth", "notes", "exclude", "memory_capacity")


def _json_type(value: object) -> str:
    if _is_number(value):
        return "a number"
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _peak_from_json(item: object, where: str) -> DevicePeak:
    if not isinstance(item, dict):
        raise FlowrateError(f"{where}: expected an object with the DevicePeak fields, got {_json_type(item)}")
    missing = [key for key in _REQUIRED if key not in item]
    if missing:
        raise FlowrateError(f"{where}: missing {', '.join(missing)} (required: {', '.join(_REQUIRED)})")
    unknown = sorted(set(item) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        allowed = ", ".join(_REQUIRED + _OPTIONAL)
        raise FlowrateError(f"{where}: unknown field(s) {', '.join(unknown)}; allowed: {allowed}")
    if not isinstance(item["dense_flops"], dict):
        raise FlowrateError(f"{where}: dense_flops must be an object, got {_json_type(item['dense_flops'])}")
    try:
        return DevicePeak(
            name=item["name"],
            match=item["match"],
            dense_flops=item["dense_flops"],
            memory_bandwidth=item.get("memory_bandwidth"),
            host_link_bandwidth=item.get("host_link_bandwidth"),
            source=item["source"],
            notes=item.get("notes", ""),
            exclude=item.get("exclude", ()),
            memory_capacity=item.get("memory_capacity"),
        )
    except FlowrateError as error:
        raise FlowrateError(f"{where}: {error}") from None


def load_peak_file(path: str | os.PathLike[str]) -> list[DevicePeak]:
    """Entries from a JSON file: a list of objects with the ``DevicePeak`` fields, FLOP/s and bytes/s."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        raise FlowrateError(f"peak file {file}: cannot read it ({error.strerror or error})") from None
    except UnicodeDecodeError:
        raise FlowrateError(f"peak file {file}: not UTF-8 text (a JSON list of entries)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise FlowrateError(
            f"peak file {file}: not valid JSON ({error.msg} at line {error.lineno}, column {error.colno})"
        ) from None
    if not isinstance(data, list):
        raise FlowrateError(f"peak file {file}: expected a JSON list of entries, got {_json_type(data)}")
    return [_peak_from_json(item, f"peak file {file}: entry {i}") for i, item in enumerate(data)]


@functools.cache
def _env_file_peaks(path: str) -> tuple[DevicePeak, ...]:
    # Cached per path value: looked up once per run, not once per metric. A failure is not cached.
    try:
        return tuple(load_peak_file(path))
    except FlowrateError as error:
        raise FlowrateError(f"{PEAKS_ENV}: {error}") from None  # the user set it: say where


def _candidates() -> list[DevicePeak]:
    env_path = os.environ.get(PEAKS_ENV, "").strip()
    from_env = _env_file_peaks(env_path) if env_path else ()
    return [*reversed(_registered), *from_env, *BUILTIN_PEAKS]


def known_devices() -> list[DevicePeak]:
    """Every entry in search order: registered, then ``FLOWRATE_PEAKS``, then built-in."""
    return _candidates()


def find_device(device_name: str) -> DevicePeak | None:
    """The first entry matching ``device_name``: registered, then ``FLOWRATE_PEAKS``, then built-in."""
    for peak in _candidates():
        if peak.matches(device_name):
            return peak
    return None


def no_figure(key: str, device: str, listed: list[str]) -> str:
    """Why a device has no FLOP/s at precision ``key``: the table lacks the figure (it cannot tell a
    device without such units from an entry nobody wrote), and how to add it."""
    figures = ", ".join(listed) or "no FLOP/s figures"
    return (
        f"the peak table has no {key} figure for {device} (it lists {figures}): "
        "if its datasheet gives one, add it with FLOWRATE_PEAKS=peaks.json or "
        "flowrate.measure.peaks.register_peak()"
    )


def peak_for(device_name: str, precision: str) -> PeakLookup:
    """The dense datasheet peak for ``device_name`` at ``precision``, or None with a one-line reason."""
    key = precision_key(precision)
    entry = find_device(device_name)
    if entry is None:
        return PeakLookup(
            flops=None,
            memory_bandwidth=None,
            host_link_bandwidth=None,
            entry=None,
            reason=(
                f"no datasheet peak for {device_name!r}: add one with FLOWRATE_PEAKS=peaks.json "
                "or flowrate.measure.peaks.register_peak()"
            ),
        )
    flops = entry.dense_flops.get(key)
    reason = None
    if flops is None:
        reason = no_figure(key, entry.name, [k for k in PRECISION_KEYS if k in entry.dense_flops])
    return PeakLookup(
        flops=flops,
        memory_bandwidth=entry.memory_bandwidth,
        host_link_bandwidth=entry.host_link_bandwidth,
        entry=entry,
        reason=reason,
    )
