"""What every kernel problem shares: operand dtypes, the call count, weights, the base class.

The semantics all kernels follow are in the package's docstring (flowrate.problems.kernels).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from flowrate.config import Mode, Precision
from flowrate.errors import ConfigError, FlowrateError
from flowrate.problems.base import Problem
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


def require_positive(config: Any, *names: str) -> None:
    """Raise ConfigError naming the first of ``names`` that is not a positive integer."""
    for name in names:
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(name, f"must be a positive integer, got {value!r}")


def require_flag(config: Any, name: str) -> None:
    """Raise ConfigError unless ``name`` is 0 or 1."""
    value = getattr(config, name)
    if value not in (0, 1) or isinstance(value, bool):
        raise ConfigError(name, f"must be 0 or 1, got {value!r}")


def call_count(batch_size: int) -> torch.Tensor:
    """The call count of a step, as the batch's trailing 0-dim CPU tensor."""
    return torch.tensor(batch_size, dtype=torch.int64)


def repeat_calls(calls: torch.Tensor, op: Callable[[], torch.Tensor]) -> torch.Tensor:
    """Run ``op`` ``calls`` times (at least once); return the last output."""
    out = op()
    for _ in range(int(calls) - 1):
        out = op()
    return out


def first_element(out: torch.Tensor) -> torch.Tensor:
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
        parsed = Precision.parse(precision)
        if parsed not in OPERAND_DTYPES:
            raise ConfigError("precision", f"{parsed} quantizes a model's layers; a kernel has none")
        self.dtype = OPERAND_DTYPES[parsed]

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
