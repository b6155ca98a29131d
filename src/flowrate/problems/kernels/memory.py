"""Memory-bound kernels on the device: layer norm and copy, counted in bytes, not FLOPs.

- ``layernorm`` F.layer_norm over ``hidden`` with weight and bias: bytes = read input + write output
  + read weight and bias = (2·rows·hidden + 2·hidden) × element size; 2·hidden parameters.
- ``copy``: ``dst.copy_(src)`` of ``mib`` MiB on the device: bytes = 2 × size (read + write, the
  STREAM "copy" convention).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from flowrate.config import Mode
from flowrate.problems.base import Batch, Family
from flowrate.problems.kernels.base import (
    MIB,
    KernelProblem,
    KernelWeights,
    call_count,
    first_element,
    repeat_calls,
    require_positive,
)

# ---------------------------------------------------------------------------------------- layernorm


@dataclass(frozen=True)
class LayerNormConfig:
    rows: int
    hidden: int

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        require_positive(self, "rows", "hidden")


class LayerNorm(KernelProblem):
    """F.layer_norm over the last dimension of (rows, hidden), with weight and bias."""

    name = "layernorm"
    config: LayerNormConfig

    def build_model(self) -> nn.Module:
        hidden = self.config.hidden
        return KernelWeights(weight=torch.ones(hidden), bias=torch.zeros(hidden))  # nn.LayerNorm's init

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        c = self.config
        return self._randn((c.rows, c.hidden), device, generator), call_count(batch_size)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        x, calls = batch
        assert isinstance(model, KernelWeights)
        weight, bias = model.as_dtype(x.dtype)
        shape = (self.config.hidden,)
        # autocast runs layer_norm in fp32 on CUDA: it would cast the input (and output) every call
        with torch.autocast(x.device.type, enabled=False):
            return first_element(repeat_calls(calls, lambda: F.layer_norm(x, shape, weight, bias)))

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
        require_positive(self, "mib")


class Copy(KernelProblem):
    """dst.copy_(src) of ``mib`` MiB within device memory."""

    name = "copy"
    config: CopyConfig

    def _elements(self) -> int:
        return self.config.mib * MIB // self.element_size

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        src = self._randn((self._elements(),), device, generator)
        dst = torch.zeros_like(src)  # written now, so no first-touch cost lands in the timed loop
        return src, dst, call_count(batch_size)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        src, dst, calls = batch
        repeat_calls(calls, lambda: dst.copy_(src))
        return dst[0]  # a view: dst lives in the batch, so no copy is needed

    def forward_flops_per_sample(self) -> int:
        return 0  # memory-bound: see bytes_per_sample

    def bytes_per_sample(self, mode: Mode) -> int | None:
        return 2 * self.config.mib * MIB  # read + write, STREAM's "copy" convention


FAMILIES: tuple[Family, ...] = (
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
)
