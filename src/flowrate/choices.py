"""The choices a run's and a generation's fields take (mode, precision, optimizer, execution, freed
memory, the prefill's logits), each with the one parser that reads its spellings and names the
valid ones when it cannot."""

from __future__ import annotations

import enum

from flowrate.errors import ConfigError


class Mode(enum.StrEnum):
    """What a step does: a full training step, or a forward pass only."""

    TRAIN = "train"
    INFER = "infer"

    @classmethod
    def parse(cls, value: str | Mode) -> Mode:
        aliases = {"training": "train", "inference": "infer", "eval": "infer"}
        text = str(value).lower()
        try:
            return cls(aliases.get(text, text))
        except ValueError:
            raise ConfigError("mode", f"unknown mode {value!r}; use train or infer") from None


class Precision(enum.StrEnum):
    """Numeric policy of a step.

    fp32: everything in fp32, TF32 off. tf32: fp32 with TF32 matmuls (CUDA, Ampere and newer).
    bf16 / fp16: autocast mixed precision over fp32 master weights; fp16 adds dynamic loss
    scaling (GradScaler). pure-bf16: weights, gradients and optimizer state in bf16.
    int8-weights / int8-dynamic: inference on torchao-quantized linear layers (int8 weights; the
    second also quantizes activations per token at run time). fp8: torchao float8 training
    (float8 linear matmuls, bf16 autocast elsewhere; CUDA compute capability 8.9 or newer).
    """

    FP32 = "fp32"
    TF32 = "tf32"
    BF16 = "bf16"
    FP16 = "fp16"
    PURE_BF16 = "pure-bf16"
    INT8_WEIGHTS = "int8-weights"
    INT8_DYNAMIC = "int8-dynamic"
    FP8 = "fp8"

    @property
    def inference_only(self) -> bool:
        """Formats that quantize a trained model for inference: a training step cannot use them."""
        return self in (Precision.INT8_WEIGHTS, Precision.INT8_DYNAMIC)

    @classmethod
    def parse(cls, value: str | Precision) -> Precision:
        text = str(value).lower().replace("_", "-")
        aliases = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16"}
        try:
            return cls(aliases.get(text, text))
        except ValueError:
            valid = ", ".join(p.value for p in cls)
            raise ConfigError("precision", f"unknown precision {value!r}; use one of {valid}") from None


class OptimizerName(enum.StrEnum):
    ADAMW = "adamw"
    SGD = "sgd"

    @classmethod
    def parse(cls, value: str | OptimizerName) -> OptimizerName:
        try:
            return cls(str(value).lower())
        except ValueError:
            raise ConfigError("optimizer", f"unknown optimizer {value!r}; use adamw or sgd") from None


class Execution(enum.StrEnum):
    """Where the weights live: on the device (resident), or in host memory, streamed to the
    device one block at a time with the optimizer update on the host (streaming)."""

    RESIDENT = "resident"
    STREAMING = "streaming"

    @classmethod
    def parse(cls, value: str | Execution) -> Execution:
        try:
            return cls(str(value).lower())
        except ValueError:
            valid = ", ".join(e.value for e in cls)
            raise ConfigError("execution", f"unknown execution mode {value!r}; use {valid}") from None


class FreedMemory(enum.StrEnum):
    """What the process's C allocator does with host memory a step frees: release it to the
    operating system as glibc does by default (flowrate's default, what a plain process gets), so
    that each step's large tensors land on fresh pages and pay their page faults again, or keep it
    for the next step (flowrate.measure.freed_memory)."""

    KEEP = "keep"
    RELEASE = "release"

    @classmethod
    def parse(cls, value: str | FreedMemory) -> FreedMemory:
        try:
            return cls(str(value).lower())
        except ValueError:
            raise ConfigError("freed_memory", f"unknown setting {value!r}; use keep or release") from None


class PrefillLogits(enum.StrEnum):
    """The prompt positions a generation's prefill computes logits for: the last (the one the
    first token is sampled from, as transformers' generate() and serving engines do), or all."""

    LAST = "last"
    ALL = "all"

    @classmethod
    def parse(cls, value: str | PrefillLogits) -> PrefillLogits:
        try:
            return cls(str(value).lower())
        except ValueError:
            raise ConfigError("prefill_logits", f"is last or all, not {value!r}") from None
