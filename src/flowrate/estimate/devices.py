"""The rates a target device runs ops at: datasheet peaks scaled by measured efficiency.

A ``DeviceModel`` holds *achievable* rates, never bare datasheet ones:

- Where a calibration of the device exists (``flowrate estimate --calibrate`` run on it), its
  measured GEMM FLOP/s and copy bandwidth over sizes, i.e. the datasheet peak times the
  efficiency measured there, size by size; a precision it did not time gets the datasheet peak
  times the mean efficiency it measured at the others.
- A device in the peak table (flowrate.measure.peaks) with no calibration gets its datasheet
  peaks times DEFAULT_EFFICIENCY, the share large GEMMs and copies typically reach on data-centre
  GPUs (MEASUREMENT.md: 790 of 989 TFLOP/s for an H100's bf16 GEMM; STREAM-like copies reach
  80–90% of HBM bandwidth; a pinned PCIe copy about 80% of the link), and a launch overhead of
  the host's DEFAULT_LAUNCH_OVERHEAD_S per kernel.
- A CPU has no datasheet entry by design, so without a calibration there is no estimate: the
  reason says to run ``flowrate estimate --calibrate``.
"""

from __future__ import annotations

import bisect
import dataclasses
import difflib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch

from flowrate.errors import ConfigError, FlowrateError
from flowrate.estimate.calibration import Calibration, load_calibrations, local_calibration
from flowrate.estimate.overheads import Overheads
from flowrate.measure.device import local_capacity
from flowrate.measure.peaks import PRECISION_KEYS, DevicePeak, find_device, known_devices

# Shares of the datasheet peaks that large operations reach on a device never calibrated.
DEFAULT_EFFICIENCY = {"flops": 0.80, "memory": 0.85, "host_link": 0.80}
# The host's seconds per kernel of an eager PyTorch step (its op's dispatch, autograd, modules and
# launch; flowrate.estimate.probes.launch_overhead) on a GPU never calibrated: as a calibrated GPU
# host measured it (benchmarks/notes/: an H100 SXM's calibration, 30.7 µs training, 11.8
# inferring). The bare CUDA launch (about 5 µs) is a floor no eager op reaches.
DEFAULT_LAUNCH_OVERHEAD_S = {"train": 30e-6, "infer": 12e-6}

Curve = tuple[tuple[float, float], ...]  # ((size of the op, achieved rate), …), ascending in size


class EstimateUnavailable(FlowrateError):
    """No estimate can be made (no peak and no calibration, a precision the device lacks, …)."""


@dataclass(frozen=True)
class DeviceModel:
    """Achievable rates of one device, and where they come from."""

    name: str
    device_type: str  # "cuda" or "cpu"
    # op class (matmul, conv, attention) -> precision key -> achieved FLOP/s against the op's FLOPs
    flops: Mapping[str, Mapping[str, Curve]]
    bandwidth: Curve  # achieved bytes/s (read + write) against the op's bytes
    launch_overhead_s: Mapping[str, float]  # per kernel, by mode: train, infer
    host_link_bandwidth: float | None  # achievable bytes/s, per direction
    memory_capacity: float | None  # bytes
    basis: str  # one line: where the rates come from
    source: str | None = None  # the datasheet, when the peak table has the device
    elementwise: Mapping[str, float] = field(default_factory=dict)  # op key -> elements/s
    optimizer: Mapping[str, float] = field(default_factory=dict)  # fused update -> parameters/s
    overheads: Overheads | None = None  # the framework's terms (calibrated devices only)

    def at_working_set(self, bytes_per_kernel: float) -> DeviceModel:
        """This device as a step whose kernels move ``bytes_per_kernel`` each meets it: its
        overhead terms at their working-set factor (Overheads.at_working_set)."""
        if self.overheads is None or not self.overheads.working_set:
            return self
        return dataclasses.replace(self, overheads=self.overheads.at_working_set(bytes_per_kernel))

    def flop_rate(self, key: str, flops: float, op_class: str = "matmul", thin: int = 0) -> float:
        """Achieved FLOP/s of an op of ``flops`` FLOPs at precision ``key``: the class's rate at that
        size (a class the device was not calibrated for runs at the matmul rate), and no more than
        a GEMM (a 1x1 convolution, for convolutions) as thin as the op, where that was calibrated."""
        curve = self.flops.get(op_class, {}).get(key) or self.flops.get("matmul", {}).get(key)
        if not curve:
            have = ", ".join(self.precisions()) or "none"
            raise EstimateUnavailable(f"{self.name} has no {key} FLOP/s figure (it has: {have})")
        rate = interpolate(curve, flops)
        thin_curve = self.flops.get("conv_thin" if op_class.startswith("conv") else "matmul_thin", {}).get(
            key
        )
        if thin and thin_curve:
            rate = min(rate, interpolate(thin_curve, thin))
        return rate

    def bandwidth_rate(self, nbytes: float) -> float:
        return interpolate(self.bandwidth, nbytes)

    def large_flop_rate(self, key: str) -> float:
        """The rate a large GEMM reaches: the plateau of the curve."""
        return self.flop_rate(key, math.inf)

    def precisions(self) -> list[str]:
        return [k for k in PRECISION_KEYS if k in self.flops.get("matmul", {})]


def interpolate(curve: Curve, size: float) -> float:
    """The rate at ``size``, linear in log-log between points, flat beyond both ends."""
    sizes = [s for s, _ in curve]
    if size <= sizes[0]:
        return curve[0][1]
    if size >= sizes[-1]:
        return curve[-1][1]
    i = bisect.bisect_right(sizes, size)
    (s0, r0), (s1, r1) = curve[i - 1], curve[i]
    t = (math.log(size) - math.log(s0)) / (math.log(s1) - math.log(s0))
    return math.exp(math.log(r0) + t * (math.log(r1) - math.log(r0)))


def device_model(
    name: str, peak: DevicePeak | None, calibration: Calibration | None, capacity: float | None
) -> DeviceModel:
    """Combine a device's datasheet entry and calibration; raise EstimateUnavailable with neither."""
    if calibration is not None:
        return _calibrated(name, peak, calibration, capacity)
    if peak is None:
        raise EstimateUnavailable(
            f"no datasheet peak and no calibration for {name!r}: run `flowrate estimate --calibrate` on "
            "it (or add a peak with FLOWRATE_PEAKS)"
        )
    e = DEFAULT_EFFICIENCY
    flat = {key: ((1.0, value * e["flops"]),) for key, value in peak.dense_flops.items()}
    return DeviceModel(
        name=peak.name,
        device_type="cuda",
        flops={"matmul": flat},
        bandwidth=((1.0, (peak.memory_bandwidth or 0.0) * e["memory"]),),
        launch_overhead_s=dict(DEFAULT_LAUNCH_OVERHEAD_S),
        host_link_bandwidth=peak.host_link_bandwidth * e["host_link"] if peak.host_link_bandwidth else None,
        memory_capacity=capacity if capacity is not None else peak.memory_capacity,
        basis=(
            f"datasheet peaks x assumed efficiency ({e['flops']:.0%} of FLOP/s, {e['memory']:.0%} of "
            f"memory bandwidth; not calibrated), host {DEFAULT_LAUNCH_OVERHEAD_S['train'] * 1e6:g} µs per "
            f"kernel training, {DEFAULT_LAUNCH_OVERHEAD_S['infer'] * 1e6:g} inferring"
        ),
        source=peak.source,
    )


def _calibrated(
    name: str, peak: DevicePeak | None, calibration: Calibration, capacity: float | None
) -> DeviceModel:
    flops, capped = _within_datasheet(calibration.flops, peak)
    matmul = flops.setdefault("matmul", {})
    if peak is not None:  # a precision not timed: the datasheet at the efficiency measured at the others
        measured = [matmul[k][-1][1] / peak.dense_flops[k] for k in matmul if k in peak.dense_flops]
        efficiency = sum(measured) / len(measured) if measured else DEFAULT_EFFICIENCY["flops"]
        for key, value in peak.dense_flops.items():
            matmul.setdefault(key, ((1.0, value * efficiency),))
    host_link = calibration.host_link_bandwidth
    if host_link is None and peak is not None and peak.host_link_bandwidth:
        host_link = peak.host_link_bandwidth * DEFAULT_EFFICIENCY["host_link"]
    where = "datasheet peaks x efficiency measured" if peak is not None else "rates measured"
    overhead = calibration.launch_overhead_s
    return DeviceModel(
        name=peak.name if peak is not None else name,
        device_type=calibration.device_type,
        flops=flops,
        bandwidth=tuple(calibration.bandwidth),
        launch_overhead_s=dict(overhead),
        host_link_bandwidth=host_link,
        memory_capacity=_first(capacity, peak.memory_capacity if peak else None, calibration.memory_capacity),
        basis=(
            f"{where} on {calibration.device} ({calibration.threads} threads, "
            f"{calibration.measured_at[:10]}), "
            + (f"{capped} rates above the datasheet peak capped at it, " if capped else "")
            + (f"{calibration.speed_note}, " if calibration.speed_note else "")
            + (
                calibration.overheads.describe()
                if calibration.overheads is not None
                else f"{overhead.get('train', 0) * 1e6:.3g} µs per kernel training, "
                f"{overhead.get('infer', 0) * 1e6:.3g} inferring"
            )
        ),
        source=peak.source if peak is not None else None,
        elementwise=dict(calibration.elementwise),
        optimizer=dict(calibration.optimizer),
        overheads=calibration.overheads,
    )


def _within_datasheet(
    measured: Mapping[str, Mapping[str, Sequence[tuple[float, float]]]], peak: DevicePeak | None
) -> tuple[dict[str, dict[str, Curve]], int]:
    """The calibration's FLOP/s curves, each rate no higher than the datasheet's dense peak at its
    precision (a rate above it is a timing error, not the device), and how many were capped."""
    capped = 0
    curves: dict[str, dict[str, Curve]] = {}
    for op_class, by_key in measured.items():
        curves[op_class] = {}
        for key, points in by_key.items():
            ceiling = peak.dense_flops.get(key, math.inf) if peak is not None else math.inf
            capped += sum(rate > ceiling for _, rate in points)
            if points:
                curves[op_class][key] = tuple((size, min(rate, ceiling)) for size, rate in points)
    return curves, capped


def _first(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)


def local_device(device: torch.device) -> DeviceModel:
    """The model of the device a run uses, with its real memory capacity."""
    from flowrate.measure.env import device_name

    name = device_name(device)
    return device_model(name, find_device(name), local_calibration(device), local_capacity(device))


def target_device(text: str) -> DeviceModel:
    """The model of ``--target TEXT``: a peak-table device (h100, a100-80gb, …) or a calibrated one."""
    calibrations = load_calibrations()
    peak, calibrated = resolve_target(text, list(calibrations))
    if peak is not None:
        calibration = next((c for n, c in calibrations.items() if peak.matches(n)), None)
        return device_model(peak.name, peak, calibration, None)
    assert calibrated is not None
    return device_model(calibrated, None, calibrations[calibrated], None)


def target_key(peak: DevicePeak) -> str:
    """What to type after --target for a table entry: its match words joined, e.g. a100-80gb-pcie."""
    return "-".join(word.replace(" ", "-") for word in peak.match)


def resolve_target(text: str, calibrated: Sequence[str] = ()) -> tuple[DevicePeak | None, str | None]:
    """The table entry (or calibrated device name) ``text`` means; ConfigError listing the known ones."""
    wanted = text.strip().lower()
    words = [w for w in re.split(r"[\s\-_/]+", wanted) if w]
    entries = known_devices()
    for entry in entries:
        if wanted in (target_key(entry), entry.name.lower()):
            return entry, None
    by_name = [entry for entry in entries if entry.matches(" ".join(words))]
    if by_name:
        return by_name[0], None
    hits = [name for name in calibrated if wanted in name.lower()]  # the user's own devices first
    if len(hits) == 1:
        return None, hits[0]
    covering = [entry for entry in entries if set(words) <= _words_of(entry)]
    if len(covering) == 1:
        return covering[0], None
    if covering:
        keys = ", ".join(target_key(e) for e in covering)
        raise ConfigError("target", f"{text!r} matches several devices: {keys}; name one")
    known = [target_key(e) for e in entries] + list(calibrated)
    close = difflib.get_close_matches(wanted, known, n=3, cutoff=0.5)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    raise ConfigError("target", f"unknown device {text!r}{hint}; known devices: {', '.join(known)}")


def _words_of(entry: DevicePeak) -> set[str]:
    words = set(re.split(r"[\s\-_/()]+", entry.name.lower()))
    return words | set(entry.match)
