"""Precision policies: which dtypes a step computes and stores in, and what the device supports.

| policy    | weights (master) | matmuls           | loss scaling |
|-----------|------------------|-------------------|--------------|
| fp32      | fp32             | fp32 (TF32 off)   | no           |
| tf32      | fp32             | TF32 tensor cores | no           |
| bf16      | fp32             | bf16 autocast     | no           |
| fp16      | fp32             | fp16 autocast     | GradScaler   |
| pure-bf16 | bf16             | bf16              | no           |
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
        return {Precision.BF16: torch.bfloat16, Precision.FP16: torch.float16}.get(self.precision)

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
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        name = torch.cuda.get_device_name(device)
        if precision is Precision.TF32 and major < 8:
            raise ConfigError(
                "precision",
                f"tf32 needs compute capability 8.0 or newer; {name} is {major}.{minor}: use fp32 or fp16",
            )
        if precision in (Precision.BF16, Precision.PURE_BF16) and not torch.cuda.is_bf16_supported():
            raise ConfigError(
                "precision", f"{name} does not support bf16; use fp16 (with loss scaling) or fp32"
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
