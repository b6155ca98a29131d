"""The formats that rewrite a model's linear layers, through torchao (an optional dependency).

int8-weights: Int8WeightOnlyConfig, per-channel symmetric int8 weights, activations stay in the
compute dtype (the matmul dequantizes on the fly; on the CPU, aten._weight_int8pack_mm).
int8-dynamic: Int8DynamicActivationInt8WeightConfig, int8 weights and activations quantized
per token at run time, an int8 × int8 matmul. Both are inference formats (no backward).
fp8: torchao.float8.convert_to_float8_training, Float8Linear with tensorwise scaling over fp32
master weights; CUDA compute capability 8.9 or newer (flowrate.execution.precision.check_fp8).
"""

from __future__ import annotations

import logging
from types import ModuleType

from torch import nn

from flowrate.config import Precision
from flowrate.errors import ConfigError

# Float8Linear needs both of a linear layer's dims divisible by 16 (torch._scaled_mm's rule);
# smaller or odd layers stay in the autocast dtype.
FP8_DIVISOR = 16


def uses_torchao(precision: Precision) -> bool:
    return precision.inference_only or precision is Precision.FP8


def _torchao(precision: Precision) -> ModuleType:
    """Import torchao, quietly: on a CPU-only torch it logs a warning per CUDA extension it skips."""
    # torchao also registers an Enum with torch's pytree, which torch 2.13 warns is deprecated
    loggers = [logging.getLogger(name) for name in ("torchao", "torch.utils._pytree")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        import torchao
    except ImportError:
        raise ConfigError(
            "precision", f"{precision} needs torchao: pip install torchao (0.18 is tested)"
        ) from None
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
    return torchao


def apply_format(model: nn.Module, precision: Precision) -> nn.Module:
    """``model`` with its linear layers in ``precision``'s format (in place); unchanged for formats
    that do not rewrite layers. Quantize after the model is on its device."""
    if not uses_torchao(precision):
        return model
    _torchao(precision)
    if precision is Precision.FP8:
        from torchao.float8 import convert_to_float8_training

        return convert_to_float8_training(model, module_filter_fn=_fp8_eligible)
    from torchao.quantization import (
        Int8DynamicActivationInt8WeightConfig,
        Int8WeightOnlyConfig,
        quantize_,
    )

    config = (
        Int8WeightOnlyConfig()
        if precision is Precision.INT8_WEIGHTS
        else Int8DynamicActivationInt8WeightConfig()
    )
    if not any(isinstance(m, nn.Linear) for m in model.modules()):
        raise ConfigError("precision", f"{precision} quantizes nn.Linear layers; this model has none")
    quantize_(model, config)
    return model


def _fp8_eligible(module: nn.Module, _name: str) -> bool:
    return (
        isinstance(module, nn.Linear)
        and module.in_features % FP8_DIVISOR == 0
        and module.out_features % FP8_DIVISOR == 0
    )
