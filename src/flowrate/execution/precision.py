"""Precision policies: which dtypes a step computes and stores in, and what the device supports.

| policy    | weights (master) | matmuls           | loss scaling |
|-----------|------------------|-------------------|--------------|
| fp32      | fp32             | fp32 (TF32 off)   | no           |
| tf32      | fp32             | TF32 tensor cores | no           |
| bf16      | fp32             | bf16 autocast     | no           |
| fp16      | fp32             | fp16 autocast     | GradScaler   |
| pure-bf16 | bf16             | bf16              | no           |
| int8-weights, int8-dynamic | int8 (torchao, inference only) | int8 × fp32 / int8 × int8 | no |
| fp8       | fp32             | float8 linears (torchao), bf16 autocast | no |

The int8 and fp8 formats rewrite the model's linear layers: flowrate.execution.quantize.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from flowrate.config import Precision
from flowrate.errors import ConfigError


@dataclass(frozen=True)
class PrecisionPolicy:
    precision: Precision
    device: torch.device

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        autocast = {
            Precision.BF16: torch.bfloat16,
            Precision.FP16: torch.float16,
            Precision.FP8: torch.bfloat16,
        }
        return autocast.get(self.precision)

    @property
    def weight_dtype(self) -> torch.dtype:
        return torch.bfloat16 if self.precision is Precision.PURE_BF16 else torch.float32

    @property
    def uses_loss_scaling(self) -> bool:
        return self.precision is Precision.FP16

    def autocast(self) -> contextlib.AbstractContextManager[object]:
        """Autocast for mixed policies; a no-op context otherwise (cheap inside the timed loop)."""
        dtype = self.autocast_dtype
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=dtype)

    def grad_scaler(self) -> torch.amp.GradScaler | None:
        return torch.amp.GradScaler(self.device.type) if self.uses_loss_scaling else None


def check_supported(precision: Precision, device: torch.device) -> None:
    """Raise ConfigError when ``device`` cannot run ``precision``, saying what it can run."""
    if precision is Precision.FP8:
        check_fp8(device)
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        name = torch.cuda.get_device_name(device)
        if precision is Precision.TF32 and major < 8:
            raise ConfigError(
                "precision",
                f"tf32 needs compute capability 8.0 or newer; {name} is {major}.{minor}: use fp32 or fp16",
            )
        # bf16 tensor cores from Ampere (8.0) on: on older GPUs recent torch still runs bf16, by
        # emulation (is_bf16_supported() says True unless asked about emulation), far slower
        if precision in (Precision.BF16, Precision.PURE_BF16) and major < 8:
            raise ConfigError(
                "precision",
                f"{name} (compute capability {major}.{minor}) has no bf16 tensor cores (8.0 or newer "
                "needed; torch would emulate it, far slower): use fp16 (with loss scaling) or fp32",
            )
        return
    if device.type == "cpu":
        if precision is Precision.TF32:
            raise ConfigError(
                "precision",
                "tf32 is a CUDA tensor-core format; on the CPU use fp32, bf16, fp16 or pure-bf16",
            )
        return
    if precision is not Precision.FP32:
        raise ConfigError("precision", f"only fp32 is supported on {device.type} devices")


def check_fp8(device: torch.device) -> None:
    """fp8 matmuls (torch._scaled_mm, which torchao's float8 training calls) need CUDA compute
    capability 8.9 or newer: Ada Lovelace, Hopper, Blackwell."""
    needs = "fp8 needs a CUDA GPU of compute capability 8.9 or newer (Ada, Hopper, Blackwell)"
    if device.type != "cuda":
        raise ConfigError("precision", f"{needs}; this run is on {device.type}: use bf16 there")
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) < (8, 9):
        name = torch.cuda.get_device_name(device)
        raise ConfigError("precision", f"{needs}; {name} is {major}.{minor}: use bf16 there")


def supported_precisions(device: torch.device) -> list[Precision]:
    supported = []
    for precision in Precision:
        try:
            check_supported(precision, device)
        except ConfigError:
            continue
        supported.append(precision)
    return supported


@contextlib.contextmanager
def matmul_settings(precision: Precision) -> Iterator[None]:
    """Set TF32 on for tf32 and off for everything else, and restore the caller's settings after.

    cuDNN allows TF32 by default: fp32 would silently not be fp32 without this.
    """
    saved = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.get_float32_matmul_precision(),
    )
    tf32 = precision is Precision.TF32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
        torch.set_float32_matmul_precision(saved[2])
