"""Compute-bound kernels: GEMM, batched GEMM, convolution and attention, counted in FLOPs.

- ``gemm`` C = A @ B, A (m, k), B (k, n): 2·m·n·k FLOPs.
- ``bmm``: torch.bmm of (batch, m, k) and (batch, k, n): 2·batch·m·n·k FLOPs.
- ``conv2d``: NCHW, padding kernel_size // 2, no bias: 2·batch·C_out·H_out·W_out·C_in·k² FLOPs,
  C_in·C_out·k² parameters.
- ``attention``: F.scaled_dot_product_attention on (batch, heads, seq_len, head_dim): 4·B·H·S²·D
  FLOPs (QKᵀ and PV). Causal counts the (query, key) pairs the mask keeps, S·(S + 1)/2 of S²:
  4·B·H·S·(S + 1)/2·D, as flowrate's FLOP counter does (FlashAttention's benchmarks round it to S²/2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from flowrate.problems.base import Batch, Family
from flowrate.problems.kernels.base import (
    KernelProblem,
    KernelWeights,
    call_count,
    first_element,
    repeat_calls,
    require_flag,
    require_positive,
)

# --------------------------------------------------------------------------------------------- gemm


@dataclass(frozen=True)
class GemmConfig:
    m: int
    n: int
    k: int

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        require_positive(self, "m", "n", "k")


class Gemm(KernelProblem):
    """C = A @ B with A (m, k) and B (k, n)."""

    name = "gemm"
    config: GemmConfig

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        c = self.config
        a = self._randn((c.m, c.k), device, generator)
        b = self._randn((c.k, c.n), device, generator)
        return a, b, call_count(batch_size)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        a, b, calls = batch
        return first_element(repeat_calls(calls, lambda: a @ b))  # (m, n)

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
        require_positive(self, "batch", "m", "n", "k")


class Bmm(KernelProblem):
    """torch.bmm of (batch, m, k) and (batch, k, n)."""

    name = "bmm"
    config: BmmConfig

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        c = self.config
        a = self._randn((c.batch, c.m, c.k), device, generator)
        b = self._randn((c.batch, c.k, c.n), device, generator)
        return a, b, call_count(batch_size)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        a, b, calls = batch
        return first_element(repeat_calls(calls, lambda: torch.bmm(a, b)))  # (batch, m, n)

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
        require_positive(self, "batch", "channels_in", "channels_out", "image_size", "kernel_size", "stride")

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
        return images, call_count(batch_size)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        images, calls = batch
        assert isinstance(model, KernelWeights)
        (weight,) = model.as_dtype(images.dtype)
        c = self.config
        out = repeat_calls(calls, lambda: F.conv2d(images, weight, None, c.stride, c.padding))
        return first_element(out)  # (batch, C_out, H_out, W_out)

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
        require_positive(self, "batch", "heads", "seq_len", "head_dim")
        require_flag(self, "causal")


class Attention(KernelProblem):
    """F.scaled_dot_product_attention on (batch, heads, seq_len, head_dim), PyTorch's backend choice."""

    name = "attention"
    config: AttentionConfig

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        c = self.config
        shape = (c.batch, c.heads, c.seq_len, c.head_dim)
        q, k, v = (self._randn(shape, device, generator) for _ in range(3))
        return q, k, v, call_count(batch_size)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        q, k, v, calls = batch
        causal = bool(self.config.causal)
        return first_element(
            repeat_calls(calls, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
        )

    def forward_flops_per_sample(self) -> int:
        c = self.config
        pairs = c.seq_len * (c.seq_len + 1) // 2 if c.causal else c.seq_len**2  # the mask keeps
        return 4 * c.batch * c.heads * pairs * c.head_dim  # QKᵀ and PV, 2·D per pair each


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
)
