"""Kernel problems: single operations (GEMM, convolution, attention, memory copies) beside the models.

Semantics shared by every kernel:

- **A sample is one kernel call.** ``batch_size`` is the number of calls per step (default 1), so
  samples/s = calls/s, FLOP/s = calls/s × forward_flops_per_sample(), and bytes/s = calls/s ×
  bytes_per_sample(). The call count travels in the batch as a trailing 0-dim int64 tensor on
  the CPU (reading it does not synchronize the device); loss() runs the operation that many times.
- **Forward only**: kernels run in infer mode (``torch.inference_mode()`` plus the precision's
  autocast); ``--mode train`` is refused.
- **Operand dtype follows the precision** (set_precision): fp32 and tf32 → float32 (TF32 off or on,
  as flowrate sets it), bf16 and pure-bf16 → bfloat16, fp16 → float16. Operands are made in that
  dtype on the device in make_batch, so autocast finds them already in its dtype and casts nothing
  inside the timed loop. Weights (conv2d, layernorm) are fp32 parameters of the "model", like a
  model's; they are cast to the operand dtype once per model and kept (see KernelWeights).
- **The loss** is one element of the last call's output (copied out of outputs made per call, so
  the loop's pending values do not keep whole outputs alive; a view for the copy kernels, whose
  outputs live in the batch). No reduction: it would add a memory-bound kernel to every step. The
  one-element copy is one tiny kernel per step, not per call; raise --batch-size to amortise it.
- **FLOPs** are exact formulas with one multiply-add = 2 FLOPs, and agree with
  ``torch.utils.flop_counter.FlopCounterMode`` except for causal attention (below). Memory-bound
  kernels (layernorm, copy, host link) count 0 FLOPs and report bytes_per_sample(), which the
  runner turns into bytes/s against the device memory (or host link) bandwidth; compute kernels
  report no bytes, so no bandwidth fraction that means nothing appears beside their FLOP/s.
- **No blocks**: a kernel has nothing to stream, so blocks() raises FlowrateError (the runner
  records "no blocks").

The kernels:

- ``gemm`` C = A @ B, A (m, k), B (k, n): 2·m·n·k FLOPs.
- ``bmm``: torch.bmm of (batch, m, k) and (batch, k, n): 2·batch·m·n·k FLOPs.
- ``conv2d``: NCHW, padding kernel_size // 2, no bias: 2·batch·C_out·H_out·W_out·C_in·k² FLOPs,
  C_in·C_out·k² parameters.
- ``attention``: F.scaled_dot_product_attention on (batch, heads, seq_len, head_dim): 4·B·H·S²·D
  FLOPs (QKᵀ and PV). Causal counts half, 2·B·H·S²·D: only the unmasked half is useful work, the
  convention of FlashAttention's benchmarks. FlopCounterMode counts the full square for causal too.
- ``layernorm`` F.layer_norm over ``hidden`` with weight and bias: bytes = read input + write output
  + read weight and bias = (2·rows·hidden + 2·hidden) × element size; 2·hidden parameters.
- ``copy``: ``dst.copy_(src)`` of ``mib`` MiB on the device: bytes = 2 × size (read + write, the
  STREAM "copy" convention).
- ``h2d`` / ``d2h``: one copy of ``mib`` MiB between host and device: bytes = size. ``duplex``:
  both directions at once on two CUDA streams: bytes = 2 × size (so its bandwidth
  fraction, against the per-direction link peak, can reach 2). Host buffers are pinned
  (``pin_memory=True``, ``non_blocking=True``) by default; ``-O pinned=0`` uses pageable tensors and
  blocking copies, which is what a plain ``.to()`` of an ordinary tensor does. CUDA only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from flowrate.config import Mode, Precision
from flowrate.errors import ConfigError, FlowrateError
from flowrate.problems.base import Batch, Family, Problem
from flowrate.problems.sample import SampleField

MIB = 1 << 20

# The operand dtype of each precision; TF32 is a matmul setting on float32 operands.
OPERAND_DTYPES: dict[Precision, torch.dtype] = {
    Precision.FP32: torch.float32,
    Precision.TF32: torch.float32,
    Precision.BF16: torch.bfloat16,
    Precision.PURE_BF16: torch.bfloat16,
    Precision.FP16: torch.float16,
}


def _require_positive(config: Any, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(name, f"must be a positive integer, got {value!r}")


def _require_flag(config: Any, name: str) -> None:
    value = getattr(config, name)
    if value not in (0, 1) or isinstance(value, bool):
        raise ConfigError(name, f"must be 0 or 1, got {value!r}")


def _calls(batch_size: int) -> torch.Tensor:
    """The call count of a step, as the batch's trailing 0-dim CPU tensor."""
    return torch.tensor(batch_size, dtype=torch.int64)


def _repeat(calls: torch.Tensor, op: Callable[[], torch.Tensor]) -> torch.Tensor:
    """Run ``op`` ``calls`` times (at least once); return the last output."""
    out = op()
    for _ in range(int(calls) - 1):
        out = op()
    return out


def _element(out: torch.Tensor) -> torch.Tensor:
    """A 0-dim copy of the output's first element: indexing is a view even of a non-contiguous
    output (reshape would copy it all), and the copy lets the output be freed."""
    return out[(0,) * out.dim()].clone()


class KernelWeights(nn.Module):
    """The weights of a kernel (conv2d, layernorm): fp32 parameters, like a model's.

    ``as_dtype`` returns them in the operands' dtype, cast once per model and kept (infer mode
    never changes them): casting per call would add kernels to every timed call. Autocast would
    cast an fp32 conv weight on every call (its cast cache is off in inference mode), and runs
    layer_norm in fp32 on CUDA, which would cast the whole input on every call; loss() therefore
    passes weights already in the operand dtype, and runs layer_norm with autocast off.
    """

    def __init__(self, **weights: torch.Tensor) -> None:
        super().__init__()
        for name, tensor in weights.items():
            self.register_parameter(name, nn.Parameter(tensor))
        self._cast_key: tuple[Any, ...] | None = None
        self._cast: list[torch.Tensor] = []

    def as_dtype(self, dtype: torch.dtype) -> list[torch.Tensor]:
        params = list(self.parameters())
        if all(p.dtype == dtype for p in params):
            return list(params)  # fp32, or the executor already cast them (pure-bf16)
        # keyed on the storage too: moving or casting the model makes a new cast
        key = (dtype, *((p.data_ptr(), p.dtype, p.device) for p in params))
        if key != self._cast_key:
            self._cast = [p.detach().to(dtype) for p in params]
            self._cast_key = key
        return self._cast


class KernelProblem(Problem):
    """What every kernel shares: infer only, one call per sample, operands in the precision's dtype."""

    modes = (Mode.INFER,)
    default_mode = Mode.INFER
    default_batch_size = 1

    def __init__(self, config: Any) -> None:
        self.config = config
        self.dtype = torch.float32

    def set_precision(self, precision: Precision) -> None:
        self.dtype = OPERAND_DTYPES[Precision.parse(precision)]

    @property
    def element_size(self) -> int:
        return self.dtype.itemsize

    def build_model(self) -> nn.Module:
        return nn.Module()  # no weights: the "model" is empty

    def parameter_count(self) -> int:
        return 0

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        raise FlowrateError(
            f"{self.name} is a single kernel: it has no blocks, so weight streaming cannot run it"
        )

    def sample_spec(self) -> tuple[SampleField, ...]:
        raise FlowrateError(
            f"{self.name} is a kernel: it runs on synthetic operands made on the device, not on a "
            "dataset; --data applies to the model problems (fc_mnist, transformer, bert-base, "
            "roberta-large, resnet50)"
        )

    def describe(self) -> dict[str, Any]:
        return dataclasses.asdict(self.config)

    def _randn(
        self, shape: tuple[int, ...], device: torch.device, generator: torch.Generator
    ) -> torch.Tensor:
        # N(0, 1) operands, like normalised activations, made directly in the operand dtype
        return torch.randn(shape, device=device, generator=generator, dtype=self.dtype)


# --------------------------------------------------------------------------------------------- gemm


@dataclass(frozen=True)
class GemmConfig:
    m: int
    n: int
    k: int

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        _require_positive(self, "m", "n", "k")


class Gemm(KernelProblem):
    """C = A @ B with A (m, k) and B (k, n)."""

    name = "gemm"
    config: GemmConfig

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        c = self.config
        a = self._randn((c.m, c.k), device, generator)
        b = self._randn((c.k, c.n), device, generator)
        return a, b, _calls(batch_size)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        a, b, calls = batch
        return _element(_repeat(calls, lambda: a @ b))  # (m, n)

    def forward_flops_per_sample(self) -> int:
        c = self.config
        return 2 * c.m * c.n * c.k


# ---------------------------------------------------------------------------------------------- bmm


@dataclass(frozen=True)
class BmmConfig:
    batch: int
    m: int
    n: int
    k: int

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        _require_positive(self, "batch", "m", "n", "k")


class Bmm(KernelProblem):
    """torch.bmm of (batch, m, k) and (batch, k, n)."""

    name = "bmm"
    config: BmmConfig

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        c = self.config
        a = self._randn((c.batch, c.m, c.k), device, generator)
        b = self._randn((c.batch, c.k, c.n), device, generator)
        return a, b, _calls(batch_size)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        a, b, calls = batch
        return _element(_repeat(calls, lambda: torch.bmm(a, b)))  # (batch, m, n)

    def forward_flops_per_sample(self) -> int:
        c = self.config
        return 2 * c.batch * c.m * c.n * c.k


# ------------------------------------------------------------------------------------------- conv2d


@dataclass(frozen=True)
class Conv2dConfig:
    batch: int
    channels_in: int
    channels_out: int
    image_size: int
    kernel_size: int = 3
    stride: int = 1

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        _require_positive(self, "batch", "channels_in", "channels_out", "image_size", "kernel_size", "stride")

    @property
    def padding(self) -> int:
        return self.kernel_size // 2

    @property
    def output_size(self) -> int:
        return (self.image_size + 2 * self.padding - self.kernel_size) // self.stride + 1


class Conv2d(KernelProblem):
    """A 2-D convolution over NCHW input, padding kernel_size // 2, no bias (as in ResNets)."""

    name = "conv2d"
    config: Conv2dConfig

    def build_model(self) -> nn.Module:
        c = self.config
        weight = torch.empty(c.channels_out, c.channels_in, c.kernel_size, c.kernel_size)
        nn.init.kaiming_uniform_(weight, a=math.sqrt(5))  # nn.Conv2d's default initialisation
        return KernelWeights(weight=weight)

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        c = self.config
        images = self._randn((c.batch, c.channels_in, c.image_size, c.image_size), device, generator)
        return images, _calls(batch_size)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        images, calls = batch
        assert isinstance(model, KernelWeights)
        (weight,) = model.as_dtype(images.dtype)
        c = self.config
        out = _repeat(calls, lambda: F.conv2d(images, weight, None, c.stride, c.padding))
        return _element(out)  # (batch, C_out, H_out, W_out)

    def parameter_count(self) -> int:
        c = self.config
        return c.channels_in * c.channels_out * c.kernel_size**2

    def forward_flops_per_sample(self) -> int:
        c = self.config
        return 2 * c.batch * c.channels_out * c.output_size**2 * c.channels_in * c.kernel_size**2

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "output_size": self.config.output_size}


# ---------------------------------------------------------------------------------------- attention


@dataclass(frozen=True)
class AttentionConfig:
    batch: int
    heads: int
    seq_len: int
    head_dim: int
    causal: int = 0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        _require_positive(self, "batch", "heads", "seq_len", "head_dim")
        _require_flag(self, "causal")


class Attention(KernelProblem):
    """F.scaled_dot_product_attention on (batch, heads, seq_len, head_dim), PyTorch's backend choice."""

    name = "attention"
    config: AttentionConfig

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        c = self.config
        shape = (c.batch, c.heads, c.seq_len, c.head_dim)
        q, k, v = (self._randn(shape, device, generator) for _ in range(3))
        return q, k, v, _calls(batch_size)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        q, k, v, calls = batch
        causal = bool(self.config.causal)
        return _element(_repeat(calls, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)))

    def forward_flops_per_sample(self) -> int:
        c = self.config
        full = 4 * c.batch * c.heads * c.seq_len**2 * c.head_dim  # QKᵀ and PV, 2·S²·D each
        # causal: only the unmasked half is useful work (FlashAttention's benchmark convention)
        return full // 2 if c.causal else full


# ---------------------------------------------------------------------------------------- layernorm


@dataclass(frozen=True)
class LayerNormConfig:
    rows: int
    hidden: int

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        _require_positive(self, "rows", "hidden")


class LayerNorm(KernelProblem):
    """F.layer_norm over the last dimension of (rows, hidden), with weight and bias."""

    name = "layernorm"
    config: LayerNormConfig

    def build_model(self) -> nn.Module:
        hidden = self.config.hidden
        return KernelWeights(weight=torch.ones(hidden), bias=torch.zeros(hidden))  # nn.LayerNorm's init

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        c = self.config
        return self._randn((c.rows, c.hidden), device, generator), _calls(batch_size)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        x, calls = batch
        assert isinstance(model, KernelWeights)
        weight, bias = model.as_dtype(x.dtype)
        shape = (self.config.hidden,)
        # autocast runs layer_norm in fp32 on CUDA: it would cast the input (and output) every call
        with torch.autocast(x.device.type, enabled=False):
            return _element(_repeat(calls, lambda: F.layer_norm(x, shape, weight, bias)))

    def parameter_count(self) -> int:
        return 2 * self.config.hidden

    def forward_flops_per_sample(self) -> int:
        return 0  # memory-bound: see bytes_per_sample

    def bytes_per_sample(self, mode: Mode) -> int | None:
        c = self.config
        # read the input, write the output, read weight and bias (in the operand dtype)
        return (2 * c.rows * c.hidden + 2 * c.hidden) * self.element_size


# --------------------------------------------------------------------------------------------- copy


@dataclass(frozen=True)
class CopyConfig:
    mib: int

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        _require_positive(self, "mib")


class Copy(KernelProblem):
    """dst.copy_(src) of ``mib`` MiB within device memory."""

    name = "copy"
    config: CopyConfig

    def _elements(self) -> int:
        return self.config.mib * MIB // self.element_size

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        src = self._randn((self._elements(),), device, generator)
        dst = torch.zeros_like(src)  # written now, so no first-touch cost lands in the timed loop
        return src, dst, _calls(batch_size)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        src, dst, calls = batch
        _repeat(calls, lambda: dst.copy_(src))
        return dst[0]  # a view: dst lives in the batch, so no copy is needed

    def forward_flops_per_sample(self) -> int:
        return 0  # memory-bound: see bytes_per_sample

    def bytes_per_sample(self, mode: Mode) -> int | None:
        return 2 * self.config.mib * MIB  # read + write, STREAM's "copy" convention


# ---------------------------------------------------------------------------------------- host link


@dataclass(frozen=True)
class HostLinkConfig:
    mib: int
    pinned: int = 1

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        _require_positive(self, "mib")
        _require_flag(self, "pinned")


_LINK_WORDS = {
    "h2d": "the host-to-device link",
    "d2h": "the device-to-host link",
    "duplex": "both directions of the host link at once",
}


class HostLink(KernelProblem):
    """Copies of ``mib`` MiB over the host link: h2d, d2h, or duplex (both at once, two streams).

    Pinned buffers copy with non_blocking=True (asynchronous DMA); pageable ones with blocking
    copies, as a plain ``.to()`` of an ordinary tensor does (the driver stages them through its own
    pinned buffer). In duplex, the side stream carries the device-to-host copies: it waits for the
    current stream at the start of a step and the current stream waits for it at the end, so the
    step's value is ordered after both directions' copies.
    """

    config: HostLinkConfig
    bandwidth_kind = "host_link"  # compared with the datasheet host link bandwidth, per direction

    def __init__(self, config: HostLinkConfig, direction: str) -> None:
        super().__init__(config)
        self.name = direction
        self._side_streams: dict[torch.device, torch.cuda.Stream] = {}

    @property
    def pinned(self) -> bool:
        return bool(self.config.pinned)

    def _elements(self) -> int:
        return self.config.mib * MIB // self.element_size

    def _host_buffer(self, device_data: torch.Tensor | None) -> torch.Tensor:
        # zeros / copy_ touch every page now, so no page faults land in the timed loop
        host = torch.zeros(self._elements(), dtype=self.dtype, pin_memory=self.pinned)
        if device_data is not None:
            host.copy_(device_data)
        return host

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        if device.type != "cuda":
            raise ConfigError(
                "device",
                f"{self.name} measures {_LINK_WORDS[self.name]} and needs a CUDA device; use --device cuda",
            )
        shape = (self._elements(),)
        if self.name == "h2d":
            host_src = self._host_buffer(self._randn(shape, device, generator))
            return host_src, torch.zeros(shape, dtype=self.dtype, device=device), _calls(batch_size)
        if self.name == "d2h":
            return self._randn(shape, device, generator), self._host_buffer(None), _calls(batch_size)
        host_src = self._host_buffer(self._randn(shape, device, generator))
        device_dst = torch.zeros(shape, dtype=self.dtype, device=device)
        device_src = self._randn(shape, device, generator)
        return host_src, device_dst, device_src, self._host_buffer(None), _calls(batch_size)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        blocking = not self.pinned
        if self.name == "h2d":
            host_src, device_dst, calls = batch
            _repeat(calls, lambda: device_dst.copy_(host_src, non_blocking=not blocking))
            return device_dst[0]
        if self.name == "d2h":
            device_src, host_dst, calls = batch
            _repeat(calls, lambda: host_dst.copy_(device_src, non_blocking=not blocking))
            return device_src[0]  # a device element: ordered on the stream, and finite
        host_src, device_dst, device_src, host_dst, calls = batch
        current = torch.cuda.current_stream(device_dst.device)
        side = self._side_stream(device_dst.device)
        side.wait_stream(current)
        _repeat(calls, lambda: device_dst.copy_(host_src, non_blocking=not blocking))
        with torch.cuda.stream(side):
            _repeat(calls, lambda: host_dst.copy_(device_src, non_blocking=not blocking))
        current.wait_stream(side)
        return device_dst[0]

    def _side_stream(self, device: torch.device) -> torch.cuda.Stream:
        if device not in self._side_streams:
            self._side_streams[device] = torch.cuda.Stream(device=device)
        return self._side_streams[device]

    def forward_flops_per_sample(self) -> int:
        return 0  # memory-bound: see bytes_per_sample

    def bytes_per_sample(self, mode: Mode) -> int | None:
        size = self.config.mib * MIB
        return 2 * size if self.name == "duplex" else size


# ----------------------------------------------------------------------------------------- families


def _host_link_family(direction: str, summary: str) -> Family:
    return Family(
        name=direction,
        summary=summary,
        sizes={
            "default": HostLinkConfig(mib=256),
            "debug": HostLinkConfig(mib=1),
            "large": HostLinkConfig(mib=1024),
        },
        default_size="default",
        build=lambda config: HostLink(config, direction),
        options=("mib", "pinned"),
    )


FAMILIES: tuple[Family, ...] = (
    Family(
        name="gemm",
        summary="kernel: matrix multiply C = A @ B, A (m, k), B (k, n)",
        sizes={
            "default": GemmConfig(m=4096, n=4096, k=4096),
            "debug": GemmConfig(m=64, n=64, k=64),
            "large": GemmConfig(m=8192, n=8192, k=8192),
            "xl": GemmConfig(m=16384, n=16384, k=16384),
        },
        default_size="default",
        build=Gemm,
        options=("m", "n", "k"),
    ),
    Family(
        name="bmm",
        summary="kernel: batched matrix multiply torch.bmm, (batch, m, k) @ (batch, k, n)",
        sizes={
            "default": BmmConfig(batch=32, m=1024, n=1024, k=1024),
            "debug": BmmConfig(batch=4, m=32, n=32, k=32),
            "large": BmmConfig(batch=64, m=2048, n=2048, k=2048),
        },
        default_size="default",
        build=Bmm,
        options=("batch", "m", "n", "k"),
    ),
    Family(
        name="conv2d",
        summary="kernel: 2-D convolution, NCHW, padding k//2, no bias (ResNet-like)",
        sizes={
            # ResNet-50's 3x3 convolution of its first stage
            "default": Conv2dConfig(batch=32, channels_in=64, channels_out=64, image_size=56),
            "debug": Conv2dConfig(batch=2, channels_in=4, channels_out=8, image_size=8),
            # its second stage at batch 256
            "large": Conv2dConfig(batch=256, channels_in=128, channels_out=128, image_size=28),
        },
        default_size="default",
        build=Conv2d,
        options=("batch", "channels_in", "channels_out", "image_size", "kernel_size", "stride"),
        sample_shape_option="image_size",
    ),
    Family(
        name="attention",
        summary="kernel: scaled dot-product attention on (batch, heads, seq_len, head_dim)",
        sizes={
            "default": AttentionConfig(batch=4, heads=16, seq_len=2048, head_dim=64),
            "debug": AttentionConfig(batch=2, heads=2, seq_len=32, head_dim=16),
            "large": AttentionConfig(batch=4, heads=32, seq_len=8192, head_dim=128),
        },
        default_size="default",
        build=Attention,
        options=("batch", "heads", "seq_len", "head_dim", "causal"),
        sample_shape_option="seq_len",
    ),
    Family(
        name="layernorm",
        summary="kernel: layer norm with weight and bias over (rows, hidden); memory-bound",
        sizes={
            "default": LayerNormConfig(rows=16384, hidden=4096),
            "debug": LayerNormConfig(rows=16, hidden=64),
            "large": LayerNormConfig(rows=65536, hidden=8192),
        },
        default_size="default",
        build=LayerNorm,
        options=("rows", "hidden"),
    ),
    Family(
        name="copy",
        summary="kernel: device memory copy of mib MiB; bytes = read + write",
        sizes={
            "default": CopyConfig(mib=256),
            "debug": CopyConfig(mib=1),
            "large": CopyConfig(mib=2048),
        },
        default_size="default",
        build=Copy,
        options=("mib",),
    ),
    _host_link_family("h2d", "kernel: host-to-device copy of mib MiB (pinned=1 by default); CUDA only"),
    _host_link_family("d2h", "kernel: device-to-host copy of mib MiB (pinned=1 by default); CUDA only"),
    _host_link_family(
        "duplex", "kernel: host-to-device and device-to-host copies at once, two streams; CUDA only"
    ),
)
