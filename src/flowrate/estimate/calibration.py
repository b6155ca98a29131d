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
  runs (modules, autograd, the optimizer), once training and once for inference.

A point's rate leaves out the bare cost of one call (the time of a 1 x 1 GEMM), which the cost
model adds back per kernel as the launch overhead. The ops are timed directly rather than through
the kernel problems' harness, whose per-call bookkeeping would swamp a 16 x 16 GEMM. Each point
takes the fastest of three rounds: other processes on the machine can only slow a round down.

Results are kept per device name (as ``flowrate.measure.env.device_name`` gives it) in a JSON file:
``$FLOWRATE_CALIBRATION``, else ``$XDG_CACHE_HOME/flowrate/calibration.json``, else
``~/.cache/flowrate/calibration.json``. A CPU's rates depend on its thread count, which is kept
with them.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from flowrate.config import Precision
from flowrate.errors import FlowrateError

CALIBRATION_ENV = "FLOWRATE_CALIBRATION"
# History of the file format: 1, the first.
CALIBRATION_VERSION = 1

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
ELEMENTWISE_SIZE = 1 << 20
OPTIMIZER_PARAMETERS = 1 << 24
# A call slower than this ends its ladder (fp16 convolutions on most CPUs crawl).
MAX_CALL_S = 0.05
_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

Points = list[tuple[float, float]]  # [(size of the op, achieved rate)], ascending in size
Rung = tuple[float, float, Callable[[], object]]  # (size, work per call, the call) of a ladder


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

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
        )


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
        return {name: Calibration.from_dict(entry) for name, entry in data["devices"].items()}
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise FlowrateError(f"calibration file {file} is damaged ({error!r}); {again}") from None


def save_calibration(calibration: Calibration, path: str | os.PathLike[str] | None = None) -> Path:
    """Add (or replace) this device's entry in the file, written atomically; return the file."""
    from flowrate.io import write_atomic

    file = calibration_path(path)
    entries = load_calibrations(file)
    entries[calibration.device] = calibration
    data = {"version": CALIBRATION_VERSION, "devices": {k: v.to_dict() for k, v in sorted(entries.items())}}
    write_atomic(file, json.dumps(data, indent=2) + "\n")
    return file


def calibrate(
    device: torch.device,
    *,
    seconds_per_point: float = 0.04,
    on_point: Callable[[str], None] | None = None,
) -> Calibration:
    """Measure ``device``'s rates (see the module's docstring); about 10 s on a CPU."""
    from flowrate.execution.precision import check_supported, matmul_settings
    from flowrate.measure.device import local_capacity, synchronizer
    from flowrate.measure.env import device_name

    others = _OtherProcesses()
    timer = _Timer(synchronizer(device), seconds_per_point)
    kind = "cuda" if device.type == "cuda" else "cpu"
    note = on_point or (lambda _: None)
    timer.bare = timer.seconds(_gemm(device, torch.float32, 1)[2])
    flops: dict[str, dict[str, Points]] = {}
    for precision in PRECISIONS[kind]:
        try:
            check_supported(precision, device)
        except FlowrateError:
            continue
        key, dtype = precision.value, _DTYPES[precision.value]
        with matmul_settings(precision):
            ladders = {
                "matmul": [_gemm(device, dtype, side) for side in GEMM_SIDES[kind]],
                "conv": [_conv(device, dtype, kind, c, 1) for c in CONV[kind][1]],
                "conv_backward": [_conv(device, dtype, kind, c, 1, backward=True) for c in CONV[kind][1]],
                "conv3x3": [_conv(device, dtype, kind, c, 3) for c in CONV[kind][1]],
                "conv3x3_backward": [_conv(device, dtype, kind, c, 3, backward=True) for c in CONV[kind][1]],
                "attention": [_attention(device, dtype, n) for n in ATTENTION_LENGTHS[kind]],
                "attention_backward": [
                    _attention(device, dtype, n, backward=True) for n in ATTENTION_LENGTHS[kind]
                ],
            }
            ladders["matmul_thin"] = [_thin_gemm(device, dtype, kind, d) for d in (*THIN, THIN_SIDE[kind])]
            ladders["conv_thin"] = [_thin_conv(device, dtype, kind, d) for d in (*THIN, THIN_SIDE[kind])]
            for op_class, ladder in ladders.items():
                flops.setdefault(op_class, {})[key] = _nondecreasing(timer.ladder(ladder))
                note(f"{op_class} {key}: {flops[op_class][key][-1][1] / 1e9:.4g} GFLOP/s at the largest size")
    bandwidth = timer.ladder([_copy(device, size) for size in COPY_BYTES[kind]], stop=False)
    best = max(rate for _, rate in bandwidth)
    note(f"copy: {best / 1e9:.4g} GB/s at best, {bandwidth[-1][1] / 1e9:.4g} at the largest")
    elementwise = {key: ELEMENTWISE_SIZE / timer.seconds(call) for key, call in _elementwise(device).items()}
    optimizer = {
        name: OPTIMIZER_PARAMETERS / timer.seconds(call) for name, call in _optimizers(device).items()
    }
    overhead = {mode: _launch_overhead(device, mode == "train", timer) for mode in ("train", "infer")}
    note(
        f"per-kernel overhead: train {overhead['train'] * 1e6:.3g} µs, infer {overhead['infer'] * 1e6:.3g} µs"
    )
    return Calibration(
        device=device_name(device),
        device_type=kind,
        flops={op_class: by_key for op_class, by_key in flops.items() if by_key},
        bandwidth=bandwidth,
        elementwise=elementwise,
        optimizer=optimizer,
        launch_overhead_s=overhead,
        host_link_bandwidth=_host_link(device, timer) if kind == "cuda" else None,
        threads=torch.get_num_threads(),
        torch_version=torch.__version__,
        measured_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        memory_capacity=local_capacity(device),
        disturbed=others.share(),
    )


class _OtherProcesses:
    """The CPU time other processes use from now on, as a share of one CPU (psutil)."""

    def __init__(self) -> None:
        import psutil

        self._me = psutil.Process()
        self._start = (self._busy(psutil.cpu_times()), self._busy(self._me.cpu_times()), time.perf_counter())

    @staticmethod
    def _busy(times: Any) -> float:
        return float(times.user + times.system + getattr(times, "nice", 0.0))

    def share(self) -> float:
        import psutil

        system, own, start = self._start
        other = (self._busy(psutil.cpu_times()) - system) - (self._busy(self._me.cpu_times()) - own)
        return max(other, 0.0) / max(time.perf_counter() - start, 1e-9)


@dataclass
class _Timer:
    sync: Callable[[], None]
    budget: float  # seconds per point
    bare: float = 0.0  # seconds of one call that does nothing (a 1 x 1 GEMM)
    rounds: int = 3
    slow: list[float] = field(default_factory=list)

    def seconds(self, call: Callable[[], object]) -> float:
        """Seconds per call in the fastest of 3 rounds of about budget / 3 each."""
        call()
        self.sync()
        start = time.perf_counter()
        call()
        self.sync()
        once = max(time.perf_counter() - start, 1e-7)
        count = max(1, int(self.budget / self.rounds / once))
        best = float("inf")
        for _ in range(self.rounds):
            start = time.perf_counter()
            for _ in range(count):
                call()
            self.sync()
            best = min(best, (time.perf_counter() - start) / count)
        return best

    def ladder(self, ladder: list[Rung], stop: bool = True) -> Points:
        """(size, work / seconds) for each rung, the bare call's time left out; a call slower than
        MAX_CALL_S ends the ladder (a slow path: larger sizes add nothing)."""
        points = []
        for size, work, call in ladder:
            try:
                seconds = self.seconds(call)
            except (RuntimeError, NotImplementedError):  # no kernel for this dtype here
                break
            points.append((size, work / max(seconds - self.bare, seconds * 0.05)))
            if stop and seconds > MAX_CALL_S:
                break
        return points


def _nondecreasing(points: Points) -> Points:
    """A bigger op never runs at a lower rate than a smaller one: the running maximum, so noise
    at one size cannot make the curve dip."""
    best, out = 0.0, []
    for size, achieved in points:
        best = max(best, achieved)
        out.append((size, best))
    return out


def _gemm(device: torch.device, dtype: torch.dtype, side: int) -> Rung:
    a = torch.randn(side, side, device=device).to(dtype)
    b = torch.randn(side, side, device=device).to(dtype)
    return 2.0 * side**3, 2.0 * side**3, lambda: a @ b


def _thin_gemm(device: torch.device, dtype: torch.dtype, kind: str, thin: int) -> Rung:
    """A (thin x S) @ (S x S) GEMM. Its point is (thin, FLOP/s): this curve is indexed by the thin
    dimension, not by FLOPs."""
    side = THIN_SIDE[kind]
    a = torch.randn(thin, side, device=device).to(dtype)
    b = torch.randn(side, side, device=device).to(dtype)
    return float(thin), 2.0 * thin * side * side, lambda: a @ b


def _thin_conv(device: torch.device, dtype: torch.dtype, kind: str, pixels: int) -> Rung:
    """A 1x1 convolution of S // 2 channels to as many on a square image of ``pixels`` pixels (THIN
    holds squares); its point is (pixels, FLOP/s). Convolution libraries block over channels, so
    pixels are its thin side."""
    channels, side = THIN_SIDE[kind] // 2, math.isqrt(pixels)
    x = torch.randn(1, channels, side, side, device=device).to(dtype)
    w = torch.randn(channels, channels, 1, 1, device=device).to(dtype)
    return float(pixels), 2.0 * pixels * channels * channels, lambda: F.conv2d(x, w)


def _conv(
    device: torch.device, dtype: torch.dtype, kind: str, channels: int, size: int, backward: bool = False
) -> Rung:
    """A size x size convolution, stride 1, same padding; backward computes the input's and the
    weight's gradients. 3x3 apart: libraries run it with fewer multiplies (Winograd), so its
    FLOP/s (counted as direct convolution) can exceed the GEMM's."""
    batch, side = CONV[kind][0]
    x = torch.randn(batch, channels, side, side, device=device).to(dtype)
    w = torch.randn(channels, channels, size, size, device=device).to(dtype)
    flops = 2.0 * batch * channels * channels * size * size * side * side
    pad = size // 2
    if not backward:
        return flops, flops, lambda: F.conv2d(x, w, padding=pad)
    g = torch.randn_like(x)
    aten = torch.ops.aten
    return (
        2 * flops,
        2 * flops,
        lambda: aten.convolution_backward(
            g, x, w, None, [1, 1], [pad, pad], [1, 1], False, [0, 0], 1, [True, True, False]
        ),
    )


def _attention(device: torch.device, dtype: torch.dtype, length: int, backward: bool = False) -> Rung:
    """Causal attention, 8 heads of 64; FLOPs are the unmasked half, as flowrate.estimate.trace
    counts them (forward 4·B·H·S²·D, backward 2.5 times that, both halved)."""
    q, k, v = (
        torch.randn(1, 8, length, 64, device=device).to(dtype).requires_grad_(backward) for _ in range(3)
    )
    flops = 2.0 * 8 * length * length * 64
    if not backward:
        return flops, flops, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    grad = torch.randn_like(out)
    return 2.5 * flops, 2.5 * flops, lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)


def _copy(device: torch.device, size: int) -> Rung:
    src = torch.empty(size // 4, dtype=torch.float32, device=device).uniform_()
    return 2.0 * size, 2.0 * size, src.clone


def _elementwise(device: torch.device) -> dict[str, Callable[[], object]]:
    """One call per elementwise key, each writing ELEMENTWISE_SIZE elements (rows of 1024)."""
    aten = torch.ops.aten
    shape = (ELEMENTWISE_SIZE // 1024, 1024)
    x, g = torch.randn(shape, device=device), torch.randn(shape, device=device)
    y = torch.softmax(x, -1)
    _, ln_mean, ln_rstd = aten.native_layer_norm(x, [1024], None, None, 1e-5)
    image = torch.randn(max(1, ELEMENTWISE_SIZE // 65536), 64, 32, 32, device=device)
    pooled, indices = aten.max_pool2d_with_indices(image, [3, 3], [2, 2], [1, 1])
    ones, zeros = torch.ones(64, device=device), torch.zeros(64, device=device)
    running_mean, running_var = zeros.clone(), ones.clone()
    _, bn_mean, bn_invstd = aten._native_batch_norm_legit(
        image, ones, zeros, running_mean, running_var, True, 0.1, 1e-5
    )
    return {
        "gelu": lambda: F.gelu(x),
        "gelu[tanh]": lambda: F.gelu(x, approximate="tanh"),
        "gelu_backward": lambda: aten.gelu_backward(g, x),
        "gelu_backward[tanh]": lambda: aten.gelu_backward(g, x, approximate="tanh"),
        "tanh": lambda: torch.tanh(x),
        "sigmoid": lambda: torch.sigmoid(x),
        "silu": lambda: F.silu(x),
        "exp": lambda: torch.exp(x),
        "_softmax": lambda: aten._softmax(x, -1, False),
        "_softmax_backward_data": lambda: aten._softmax_backward_data(g, y, -1, torch.float32),
        "_log_softmax": lambda: aten._log_softmax(x, -1, False),
        "_log_softmax_backward_data": lambda: aten._log_softmax_backward_data(g, y, -1, torch.float32),
        "native_layer_norm": lambda: aten.native_layer_norm(x, [1024], None, None, 1e-5),
        "native_layer_norm_backward": lambda: aten.native_layer_norm_backward(
            g, x, [1024], ln_mean, ln_rstd, None, None, [True, False, False]
        ),
        "_native_batch_norm_legit": lambda: aten._native_batch_norm_legit(
            image, ones, zeros, running_mean, running_var, True, 0.1, 1e-5
        ),
        "native_batch_norm_backward": lambda: aten.native_batch_norm_backward(
            image, image, ones, running_mean, running_var, bn_mean, bn_invstd, True, 1e-5, [True, True, True]
        ),
        # pooling writes a quarter of its input: its key's elements are the input's, see trace
        "max_pool2d_with_indices": lambda: aten.max_pool2d_with_indices(image, [3, 3], [2, 2], [1, 1]),
        "max_pool2d_with_indices_backward": lambda: aten.max_pool2d_with_indices_backward(
            pooled, image, [3, 3], [2, 2], [1, 1], [1, 1], False, indices
        ),
    }


def _optimizers(device: torch.device) -> dict[str, Callable[[], object]]:
    from flowrate.config import OptimizerName
    from flowrate.execution.resident import make_optimizer

    calls: dict[str, Callable[[], object]] = {}
    for name in OptimizerName:
        params = [nn.Parameter(torch.randn(OPTIMIZER_PARAMETERS // 16, device=device)) for _ in range(16)]
        for p in params:
            p.grad = torch.randn_like(p)
        calls[name.value] = make_optimizer(name, params, 1e-4, device).step
    return calls


class _KernelCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        from flowrate.estimate.trace import is_kernel

        self.count += is_kernel(func)
        return func(*args, **(kwargs or {}))


class _TinyBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.linear = nn.Linear(width, width)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.act(self.linear(self.norm(x)))


def _launch_overhead(device: torch.device, train: bool, timer: _Timer) -> float:
    """Seconds per kernel of a step of a tiny model whose arithmetic costs nothing."""
    from flowrate.config import OptimizerName
    from flowrate.execution.resident import make_optimizer

    model = nn.Sequential(*(_TinyBlock(16) for _ in range(8))).to(device)
    x = torch.randn(1, 16, device=device)
    optimizer = make_optimizer(OptimizerName.ADAMW, list(model.parameters()), 1e-4, device)

    def step() -> None:
        if not train:
            with torch.inference_mode():
                model(x).sum()
            return
        model(x).sum().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()
    with _KernelCounter() as counter:
        step()
    return timer.seconds(step) / max(counter.count, 1)


def _host_link(device: torch.device, timer: _Timer) -> float:
    size = 256 << 20
    host = torch.empty(size // 4, dtype=torch.float32).pin_memory()
    target = torch.empty(size // 4, dtype=torch.float32, device=device)
    return size / timer.seconds(lambda: target.copy_(host, non_blocking=True))
