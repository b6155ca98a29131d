"""Measured rates of this machine's device: what turns datasheet peaks into achievable ones.

`flowrate estimate --calibrate` times, on the run's device, the operations of flowrate's kernel
problems over a ladder of sizes, because small operations reach a small share of the peak:

- **FLOP/s** of ``a @ b`` (the gemm problem), ``F.conv2d`` (conv2d) and causal
  ``F.scaled_dot_product_attention`` (attention), forward and (convolution, attention) backward,
  at every precision the device runs;
- **bandwidth** of a copy into a freshly allocated tensor (``clone``, the copy problem's work):
  a model's ops write fresh outputs, and on a CPU a fresh allocation of tens of MB costs page
  faults that a copy into a reused buffer never sees; small copies run from cache;
- **elements/s** of the common non-matmul kernels a model runs (activations, softmax,
  normalisation, pooling, and their backward), on a tensor of ELEMENTWISE_SIZE elements: on a CPU
  their arithmetic (a tanh per element) outlasts their memory traffic;
- **parameters/s** of the fused AdamW and SGD updates;
- the **launch overhead**: the time per kernel of a step of a tiny model (LayerNorm, Linear,
  GELU and a residual add, 16 wide, batch 1), whose arithmetic is nothing, run the way a model
  runs (modules, autograd, the optimizer), once training and once for inference; it prices a
  device whose calibration has no overhead terms;
- the **overhead terms** (flowrate.estimate.overheads): dispatch per op class, autograd per
  node, per module call, the optimizer's per-step, per-tensor and per-byte cost, and the fixed
  cost of a training step, each from its own micro-measurement.

``measure_rates`` measures all of these; flowrate.estimate.calibrating's ``calibrate`` (what
`--calibrate` runs) then adds the overhead terms' working-set factors, from the two reference
models (flowrate.estimate.reference) priced with them.

On a CPU a call blocks until its work is done, so a point's rate leaves out the bare cost of one
call (the time of a 1 x 1 GEMM), which the cost model adds back per op as its dispatch. A GPU's
calls return at launch and its kernels queue behind each other: a loop of calls takes the longer
of the launches and the kernels, never their sum, so nothing is left out there (leaving the launch
out would make a GPU's GEMM look faster than its datasheet allows), and
a GPU's elementwise kernels are timed on a tensor large enough that the kernel outlasts its
launch (ELEMENTWISE_SIZE). The ops are timed directly rather than through
the kernel problems' harness, whose per-call bookkeeping would swamp a 16 x 16 GEMM. Each point
takes the fastest of three rounds: other processes on the machine can only slow a round down.

Results are kept per device name (as ``flowrate.measure.env.device_name`` gives it) in a JSON file:
``$FLOWRATE_CALIBRATION``, else ``$XDG_CACHE_HOME/flowrate/calibration.json``, else
``~/.cache/flowrate/calibration.json``. A CPU's rates depend on its thread count, which is kept
with them, with the machine's fingerprint (host, device, CPU model, threads: the fields that
flowrate.results.noise groups runs of one machine by) and the torch version. This machine's
device uses its entry only when the fingerprint matches (else a warning says so and the entry is
left unused); an entry from an older torch is used with a warning that suggests recalibrating.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from flowrate.config import Precision
from flowrate.errors import FlowrateError
from flowrate.estimate.overheads import Overheads, measure_overheads
from flowrate.estimate.probes import (
    OtherProcesses,
    Points,
    Rung,
    Timer,
    attention_rung,
    conv_rung,
    copy_rung,
    elementwise_calls,
    gemm_rung,
    host_link_bandwidth,
    launch_overhead,
    nondecreasing,
    optimizer_calls,
    thin_conv_rung,
    thin_gemm_rung,
)
from flowrate.execution.precision import check_supported, matmul_settings
from flowrate.io import write_atomic
from flowrate.measure.device import local_capacity, synchronizer
from flowrate.measure.env import collect_environment, device_name
from flowrate.results.environment import environment_fingerprint, environment_from

CALIBRATION_ENV = "FLOWRATE_CALIBRATION"
# History of the file format: 1, the first; 2, the overhead terms and the machine's fingerprint.
CALIBRATION_VERSION = 2
# History of how a device is timed (an entry's ``method``): 1, the first; 2, a GPU's calls timed
# whole and its elementwise kernels on 64 Mi elements (module docstring). A GPU's entry of an
# earlier method is not used: its small ops' rates were overstated.
CALIBRATION_METHOD = 2
# How far a reference model's step may move from a calibration's start to its end before the
# machine is said to have changed speed (a restless VM's states are 1.45-1.8x apart).
SPEED_MOVED = 0.1

# The ladders, per device type: square GEMM sides; conv2d channels (3x3, batch and image side
# fixed); attention sequence lengths (8 heads of 64); copy sizes in bytes.
GEMM_SIDES = {"cpu": (16, 32, 64, 128, 256, 512, 1024, 2048), "cuda": (256, 512, 1024, 2048, 4096, 8192)}
CONV = {"cpu": ((4, 28), (2, 4, 8, 16, 32, 64, 128, 256)), "cuda": ((32, 56), (32, 64, 128, 256, 512, 1024))}
ATTENTION_LENGTHS = {"cpu": (8, 16, 32, 64, 128, 256, 512, 1024), "cuda": (256, 512, 1024, 2048, 4096)}
COPY_BYTES = {
    "cpu": tuple(4096 * 4**i for i in range(9)),  # 4 KiB … 256 MiB
    "cuda": tuple(65536 * 4**i for i in range(8)),  # 64 KiB … 1 GiB
}
# Precisions timed, per device type (tf32 exists on CUDA only).
PRECISIONS = {
    "cpu": (Precision.FP32, Precision.BF16, Precision.FP16),
    "cuda": (Precision.FP32, Precision.TF32, Precision.BF16, Precision.FP16),
}
# The thin side of the (d, S, S) GEMMs and 1x1 convolutions (d pixels, squares) that give the rate
# of thin matmuls and convolutions.
THIN = (1, 4, 16, 64, 256)
THIN_SIDE = {"cpu": 1024, "cuda": 4096}
# Elements of the tensor elementwise kernels are timed on: a CPU's run from its caches like a
# model's activations; a GPU's must outlast the launch (64 Mi fp32: about 0.1 ms on an H100).
ELEMENTWISE_SIZE = {"cpu": 1 << 20, "cuda": 1 << 26}
OPTIMIZER_PARAMETERS = 1 << 24
_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Calibration:
    """One device's measured rates."""

    device: str
    device_type: str  # "cpu" or "cuda"
    # op class (matmul, conv, attention) -> precision key -> [(FLOPs per op, achieved FLOP/s)]
    flops: dict[str, dict[str, Points]]
    # [(bytes per op, achieved bytes/s)]: a copy into a fresh tensor, read + write
    bandwidth: Points
    # elementwise key (see flowrate.estimate.trace.Op.key) -> elements of output per second
    elementwise: dict[str, float]
    # optimizer (adamw, sgd) -> parameters updated per second by the fused kernel
    optimizer: dict[str, float]
    # mode (train, infer) -> seconds per kernel of a step beyond its arithmetic and memory time
    launch_overhead_s: dict[str, float]
    host_link_bandwidth: float | None  # pinned host-to-device bytes/s (CUDA)
    threads: int
    torch_version: str
    measured_at: str
    memory_capacity: float | None = None  # bytes: the GPU's memory, or the host's RAM for a CPU
    # CPU time other processes used while it measured, as a share of one CPU: above ~0.1 the
    # rates are likely low (other work slowed the measurement down)
    disturbed: float = 0.0
    overheads: Overheads | None = None  # the framework's terms (flowrate.estimate.overheads)
    # the machine it was measured on (machine_fingerprint); empty: unknown
    fingerprint: dict[str, Any] = field(default_factory=dict)
    method: int = 1  # how it was timed (CALIBRATION_METHOD's history)
    # a reference model's training step at the calibration's end over at its start: far from 1,
    # the machine changed speed while it measured (flowrate.estimate.calibrating)
    speed_moved: float = 1.0

    @property
    def speed_note(self) -> str:
        """'the machine's speed moved x1.62 while it was calibrated', or '' when it held."""
        if abs(self.speed_moved - 1) <= SPEED_MOVED:
            return ""
        return f"the machine's speed moved x{self.speed_moved:.2f} while it was calibrated"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["overheads"] = self.overheads.to_dict() if self.overheads is not None else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        def points(values: Any) -> Points:
            return [(float(a), float(b)) for a, b in values]

        return cls(
            device=str(data["device"]),
            device_type=str(data["device_type"]),
            flops={c: {k: points(v) for k, v in byc.items()} for c, byc in data["flops"].items()},
            bandwidth=points(data["bandwidth"]),
            elementwise={k: float(v) for k, v in data["elementwise"].items()},
            optimizer={k: float(v) for k, v in data["optimizer"].items()},
            launch_overhead_s={k: float(v) for k, v in data["launch_overhead_s"].items()},
            host_link_bandwidth=data.get("host_link_bandwidth"),
            threads=int(data["threads"]),
            torch_version=str(data["torch_version"]),
            measured_at=str(data["measured_at"]),
            memory_capacity=data.get("memory_capacity"),
            disturbed=float(data.get("disturbed", 0.0)),
            overheads=Overheads.from_dict(data["overheads"]) if data.get("overheads") else None,
            fingerprint=dict(data.get("fingerprint") or {}),
            method=int(data.get("method", 1)),
            speed_moved=float(data.get("speed_moved", 1.0)),
        )


class CalibrationWarning(UserWarning):
    """A calibration that does not fit this machine or this torch; the message says what to do."""


def machine_fingerprint(device: torch.device) -> dict[str, Any]:
    """What identifies the machine, as flowrate.results.noise.machine() reads it from a result."""
    environment = environment_from(collect_environment(device, argv=[]))
    fingerprint = environment_fingerprint(environment)
    return {
        "hostname": environment.hostname,
        "device_name": fingerprint["device_name"],
        "cpu_model": fingerprint["cpu_model"],
        "num_threads": fingerprint["num_threads"],
    }


def local_calibration(device: torch.device, path: str | os.PathLike[str] | None = None) -> Calibration | None:
    """This machine's calibration of ``device``, or None. One measured on another machine (its
    fingerprint differs) is warned about and not used; one from another torch is used with a
    warning that suggests recalibrating."""
    calibration = load_calibrations(path).get(device_name(device))
    if calibration is None:
        return None
    again = "run `flowrate estimate --calibrate` here"
    here = machine_fingerprint(device)
    differ = [
        f"{key} {calibration.fingerprint.get(key)!r}, here {value!r}"
        for key, value in here.items()
        if calibration.fingerprint.get(key) != value
    ]
    if differ:
        warnings.warn(
            CalibrationWarning(
                f"the calibration of {calibration.device} was measured on another machine "
                f"({'; '.join(differ)}): not used; {again}"
            ),
            stacklevel=2,
        )
        return None
    if calibration.torch_version != torch.__version__:
        warnings.warn(
            CalibrationWarning(
                f"the calibration of {calibration.device} was measured under torch "
                f"{calibration.torch_version}, this is {torch.__version__}: its rates may be stale; {again}"
            ),
            stacklevel=2,
        )
    return calibration


def calibration_path(path: str | os.PathLike[str] | None = None) -> Path:
    if path is not None:
        return Path(path)
    if os.environ.get(CALIBRATION_ENV):
        return Path(os.environ[CALIBRATION_ENV])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "flowrate" / "calibration.json"


def load_calibrations(path: str | os.PathLike[str] | None = None) -> dict[str, Calibration]:
    """Every device's calibration in the file, by device name; none when there is no file."""
    file = calibration_path(path)
    again = "delete it and run `flowrate estimate --calibrate` again"
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as error:
        raise FlowrateError(f"calibration file {file} cannot be read ({error}); {again}") from None
    version = data.get("version") if isinstance(data, dict) else None
    if version != CALIBRATION_VERSION:
        raise FlowrateError(
            f"calibration file {file} has version {version!r}, not {CALIBRATION_VERSION}; {again}"
        )
    try:
        entries = {name: Calibration.from_dict(entry) for name, entry in data["devices"].items()}
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise FlowrateError(f"calibration file {file} is damaged ({error!r}); {again}") from None
    return {name: entry for name, entry in entries.items() if _timed_right(entry, file)}


def _timed_right(calibration: Calibration, file: Path) -> bool:
    """False (with a warning) for a GPU's entry timed by a method that overstated its rates."""
    if calibration.device_type != "cuda" or calibration.method >= CALIBRATION_METHOD:
        return True
    warnings.warn(
        CalibrationWarning(
            f"the calibration of {calibration.device} in {file} was timed by an earlier method that "
            "overstated a GPU's small-op rates: not used; run `flowrate estimate --calibrate` on it again"
        ),
        stacklevel=3,
    )
    return False


def save_calibration(calibration: Calibration, path: str | os.PathLike[str] | None = None) -> Path:
    """Add (or replace) this device's entry in the file, written atomically; return the file."""
    file = calibration_path(path)
    entries = load_calibrations(file)
    entries[calibration.device] = calibration
    data = {"version": CALIBRATION_VERSION, "devices": {k: v.to_dict() for k, v in sorted(entries.items())}}
    write_atomic(file, json.dumps(data, indent=2) + "\n")
    return file


def measure_rates(
    device: torch.device,
    *,
    seconds_per_point: float = 0.04,
    on_point: Callable[[str], None] | None = None,
) -> Calibration:
    """Measure ``device``'s rates and overhead terms (see the module's docstring), without their
    working-set factors (flowrate.estimate.calibrating.calibrate adds them, and sets the process to
    keep freed host memory first); about 17 s on a CPU."""
    others = OtherProcesses()
    timer = Timer(synchronizer(device), seconds_per_point)
    kind = "cuda" if device.type == "cuda" else "cpu"
    note = on_point or (lambda _: None)
    if kind == "cpu":  # a GPU's launches overlap its kernels: nothing to leave out (module docstring)
        timer.bare = timer.seconds(gemm_rung(device, torch.float32, 1)[2])
    flops = _flop_rates(device, kind, timer, note)
    bandwidth = timer.ladder([copy_rung(device, size) for size in COPY_BYTES[kind]], stop=False)
    best = max(rate for _, rate in bandwidth)
    note(f"copy: {best / 1e9:.4g} GB/s at best, {bandwidth[-1][1] / 1e9:.4g} at the largest")
    size = ELEMENTWISE_SIZE[kind]
    elementwise = {key: size / timer.seconds(call) for key, call in elementwise_calls(device, size).items()}
    optimizer = {
        name: OPTIMIZER_PARAMETERS / timer.seconds(call)
        for name, call in optimizer_calls(device, OPTIMIZER_PARAMETERS).items()
    }
    overhead = {mode: launch_overhead(device, mode == "train", timer) for mode in ("train", "infer")}
    note(
        f"per-kernel overhead: train {overhead['train'] * 1e6:.3g} µs, infer {overhead['infer'] * 1e6:.3g} µs"
    )
    overheads = measure_overheads(device, timer)
    dispatch = ", ".join(f"{name} {s * 1e6:.3g}" for name, s in overheads.dispatch_s.items())
    note(
        f"dispatch µs per op: {dispatch}; autograd {overheads.autograd_node_s * 1e6:.3g} µs per node, "
        f"{overheads.module_s * 1e6:.3g} µs per module call"
    )
    return Calibration(
        device=device_name(device),
        device_type=kind,
        flops={op_class: by_key for op_class, by_key in flops.items() if by_key},
        bandwidth=bandwidth,
        elementwise=elementwise,
        optimizer=optimizer,
        launch_overhead_s=overhead,
        host_link_bandwidth=host_link_bandwidth(device, timer) if kind == "cuda" else None,
        threads=torch.get_num_threads(),
        torch_version=torch.__version__,
        measured_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        memory_capacity=local_capacity(device),
        disturbed=others.share(),
        overheads=overheads,
        fingerprint=machine_fingerprint(device),
        method=CALIBRATION_METHOD,
    )


def _flop_rates(
    device: torch.device, kind: str, timer: Timer, note: Callable[[str], None]
) -> dict[str, dict[str, Points]]:
    """op class -> precision key -> the FLOP/s ladder, at every precision the device runs."""
    flops: dict[str, dict[str, Points]] = {}
    for precision in PRECISIONS[kind]:
        try:
            check_supported(precision, device)
        except FlowrateError:
            continue
        key, dtype = precision.value, _DTYPES[precision.value]
        with matmul_settings(precision):
            for op_class, ladder in _flop_ladders(device, dtype, kind).items():
                flops.setdefault(op_class, {})[key] = nondecreasing(timer.ladder(ladder))
                note(f"{op_class} {key}: {flops[op_class][key][-1][1] / 1e9:.4g} GFLOP/s at the largest size")
    return flops


def _flop_ladders(device: torch.device, dtype: torch.dtype, kind: str) -> dict[str, list[Rung]]:
    """The ladders of one precision, by the op class a DeviceModel prices ops with."""
    image, channels = CONV[kind]
    lengths = ATTENTION_LENGTHS[kind]
    side = THIN_SIDE[kind]
    return {
        "matmul": [gemm_rung(device, dtype, s) for s in GEMM_SIDES[kind]],
        "conv": [conv_rung(device, dtype, image, c, 1) for c in channels],
        "conv_backward": [conv_rung(device, dtype, image, c, 1, backward=True) for c in channels],
        "conv3x3": [conv_rung(device, dtype, image, c, 3) for c in channels],
        "conv3x3_backward": [conv_rung(device, dtype, image, c, 3, backward=True) for c in channels],
        "attention": [attention_rung(device, dtype, n) for n in lengths],
        "attention_backward": [attention_rung(device, dtype, n, backward=True) for n in lengths],
        "matmul_thin": [thin_gemm_rung(device, dtype, side, d) for d in (*THIN, side)],
        "conv_thin": [thin_conv_rung(device, dtype, side, d) for d in (*THIN, side)],
    }
