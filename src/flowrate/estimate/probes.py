"""The operations a calibration times, and how it times them.

Each ``*_rung`` makes one point of a ladder: (size, work per call, the call), with its tensors
made up front so the timer sees only the call. ``Timer`` takes the fastest of three rounds and
leaves out the bare cost of a call; the sizes of every ladder are flowrate.estimate.calibration's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from flowrate.config import OptimizerName
from flowrate.estimate.ops import is_kernel
from flowrate.execution.resident import make_optimizer

# A call slower than this ends its ladder (fp16 convolutions on most CPUs crawl).
MAX_CALL_S = 0.05

Points = list[tuple[float, float]]  # [(size of the op, achieved rate)], ascending in size
Rung = tuple[float, float, Callable[[], object]]  # (size, work per call, the call) of a ladder


class OtherProcesses:
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
class Timer:
    sync: Callable[[], None]
    budget: float  # seconds per point
    bare: float = 0.0  # seconds of one call that does nothing (a 1 x 1 GEMM)
    rounds: int = 3
    slow: list[float] = field(default_factory=list)

    def seconds(self, call: Callable[[], object]) -> float:
        """Seconds per call in the fastest of ``rounds`` rounds of about budget / rounds each."""
        call()
        self.sync()
        start = time.perf_counter()
        call()
        self.sync()
        once = max(time.perf_counter() - start, 1e-7)
        # many short rounds find a quiet moment for a microsecond call; a call longer than the
        # budget gets the usual 3, so a slow one never costs many times the budget
        rounds = self.rounds if once < self.budget else min(self.rounds, 3)
        count = max(1, int(self.budget / rounds / once))
        best = float("inf")
        for _ in range(rounds):
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


def nondecreasing(points: Points) -> Points:
    """A bigger op never runs at a lower rate than a smaller one: the running maximum, so noise
    at one size cannot make the curve dip."""
    best, out = 0.0, []
    for size, achieved in points:
        best = max(best, achieved)
        out.append((size, best))
    return out


def gemm_rung(device: torch.device, dtype: torch.dtype, side: int) -> Rung:
    a = torch.randn(side, side, device=device).to(dtype)
    b = torch.randn(side, side, device=device).to(dtype)
    return 2.0 * side**3, 2.0 * side**3, lambda: a @ b


def thin_gemm_rung(device: torch.device, dtype: torch.dtype, side: int, thin: int) -> Rung:
    """A (thin x S) @ (S x S) GEMM, S = ``side``. Its point is (thin, FLOP/s): this curve is
    indexed by the thin dimension, not by FLOPs."""
    a = torch.randn(thin, side, device=device).to(dtype)
    b = torch.randn(side, side, device=device).to(dtype)
    return float(thin), 2.0 * thin * side * side, lambda: a @ b


def thin_conv_rung(device: torch.device, dtype: torch.dtype, side: int, pixels: int) -> Rung:
    """A 1x1 convolution of ``side // 2`` channels to as many on a square image of ``pixels`` pixels
    (a square number); its point is (pixels, FLOP/s). Convolution libraries block over channels, so
    pixels are its thin side."""
    channels, square = side // 2, math.isqrt(pixels)
    x = torch.randn(1, channels, square, square, device=device).to(dtype)
    w = torch.randn(channels, channels, 1, 1, device=device).to(dtype)
    return float(pixels), 2.0 * pixels * channels * channels, lambda: F.conv2d(x, w)


def conv_rung(
    device: torch.device,
    dtype: torch.dtype,
    image: tuple[int, int],
    channels: int,
    size: int,
    backward: bool = False,
) -> Rung:
    """A size x size convolution on ``image`` = (batch, image side), stride 1, same padding;
    backward computes the input's and the weight's gradients. 3x3 apart: libraries run it with
    fewer multiplies (Winograd), so its FLOP/s (counted as direct convolution) can exceed the GEMM's."""
    batch, side = image
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


def attention_rung(device: torch.device, dtype: torch.dtype, length: int, backward: bool = False) -> Rung:
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


def copy_rung(device: torch.device, size: int) -> Rung:
    src = torch.empty(size // 4, dtype=torch.float32, device=device).uniform_()
    return 2.0 * size, 2.0 * size, src.clone


def elementwise_calls(device: torch.device, size: int) -> dict[str, Callable[[], object]]:
    """One call per elementwise key, each writing ``size`` elements (rows of 1024)."""
    aten = torch.ops.aten
    shape = (size // 1024, 1024)
    x, g = torch.randn(shape, device=device), torch.randn(shape, device=device)
    y = torch.softmax(x, -1)
    _, ln_mean, ln_rstd = aten.native_layer_norm(x, [1024], None, None, 1e-5)
    image = torch.randn(max(1, size // 65536), 64, 32, 32, device=device)
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


def optimizer_calls(device: torch.device, parameters: int) -> dict[str, Callable[[], object]]:
    """One fused update of ``parameters`` parameters (16 tensors) per optimizer."""
    calls: dict[str, Callable[[], object]] = {}
    for name in OptimizerName:
        params = [nn.Parameter(torch.randn(parameters // 16, device=device)) for _ in range(16)]
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
        self.count += is_kernel(func)
        return func(*args, **(kwargs or {}))


class TinyBlock(nn.Module):
    """LayerNorm, Linear, GELU and a residual add: a block whose arithmetic costs nothing."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.linear = nn.Linear(width, width)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.act(self.linear(self.norm(x)))


def launch_overhead(device: torch.device, train: bool, timer: Timer) -> float:
    """Seconds per kernel of a step of a tiny model whose arithmetic costs nothing."""
    model = nn.Sequential(*(TinyBlock(16) for _ in range(8))).to(device)
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


def host_link_bandwidth(device: torch.device, timer: Timer) -> float:
    """Bytes/s of a pinned host-to-device copy of 256 MiB."""
    size = 256 << 20
    host = torch.empty(size // 4, dtype=torch.float32).pin_memory()
    target = torch.empty(size // 4, dtype=torch.float32, device=device)
    return size / timer.seconds(lambda: target.copy_(host, non_blocking=True))
