"""fc_mnist: the classic 3-layer fully-connected MNIST classifier (784 -> h -> h -> 10, ReLU).

The smallest problem in the zoo: a few matmuls, so it measures launch and framework overhead
more than arithmetic throughput.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from flowrate.errors import ConfigError
from flowrate.problems.base import Batch, Family, Problem
from flowrate.problems.sample import SampleField

INPUTS = 28 * 28
CLASSES = 10
# Pixel statistics of the MNIST training set (the usual torchvision Normalize constants).
MNIST_MEAN = 0.1307
MNIST_STD = 0.3081
# Share of MNIST pixels that are "ink" (non-zero); ink intensities are mostly close to 1.
INK_FRACTION = 0.17
# The learnable task of `flowrate check`: one fixed MNIST-like prototype image per class, seeded
# apart from the run's seed so every batch and every run shares them; samples lose each ink
# pixel with DROPOUT and gain stray ink with STRAY, which leaves the class plain to see.
PROTOTYPE_SEED = 0x5EED
DROPOUT = 0.25
STRAY = 0.05


@dataclass(frozen=True)
class MLPConfig:
    # Width of both hidden layers.
    hidden: int = 512
    # Batch size used when the user gives none.
    default_batch_size: int = 128

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.hidden <= 0:
            raise ConfigError("hidden", f"must be a positive integer, got {self.hidden!r}")


class Dense(nn.Module):
    """One fully-connected layer, optionally followed by ReLU: (B, in) -> (B, out)."""

    def __init__(self, inputs: int, outputs: int, relu: bool) -> None:
        super().__init__()
        self.linear = nn.Linear(inputs, outputs)
        self.relu = relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Cast the input to the weights' dtype so a model cast to bf16 accepts fp32 images;
        # a no-op otherwise (autocast then picks the matmul dtype).
        x = self.linear(x.to(self.linear.weight.dtype))
        return F.relu(x) if self.relu else x


class FCNet(nn.Module):
    """784 -> hidden -> hidden -> 10. Each block's output is the next block's only input."""

    def __init__(self, config: MLPConfig) -> None:
        super().__init__()
        h = config.hidden
        self.blocks = nn.ModuleList(
            [Dense(INPUTS, h, relu=True), Dense(h, h, relu=True), Dense(h, CLASSES, relu=False)]
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images  # (B, 784)
        for block in self.blocks:
            x = block(x)  # (B, h), (B, h), then logits (B, 10)
        return x


@functools.lru_cache(maxsize=8)
def _prototypes(device: torch.device) -> torch.Tensor:
    """(10, 784) raw pixels in [0, 1]: MNIST-like ink patterns, one per class, fixed for good."""
    generator = torch.Generator().manual_seed(PROTOTYPE_SEED)
    ink = torch.rand((CLASSES, INPUTS), generator=generator) < INK_FRACTION
    intensity = 0.5 + 0.5 * torch.rand((CLASSES, INPUTS), generator=generator)
    return (intensity * ink).to(device)


class FCMnist(Problem):
    name = "fc_mnist"

    def __init__(self, config: MLPConfig) -> None:
        self.config = config
        self.default_batch_size = config.default_batch_size

    def build_model(self) -> nn.Module:
        # PyTorch's default Linear initialisation (Kaiming-uniform), as in the MNIST examples.
        return FCNet(self.config)

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        shape = (batch_size, INPUTS)
        # MNIST-like pixels: mostly 0 (background), ~17% ink with intensity in [0.5, 1], so the
        # raw mean is ≈ 0.13 like MNIST's; then the standard MNIST normalisation.
        ink = torch.rand(shape, device=device, generator=generator) < INK_FRACTION
        intensity = 0.5 + 0.5 * torch.rand(shape, device=device, generator=generator)
        pixels = intensity * ink
        images = (pixels - MNIST_MEAN) / MNIST_STD  # (B, 784)
        labels = torch.randint(0, CLASSES, (batch_size,), device=device, generator=generator)  # (B,)
        return images, labels

    def learnable_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        """Class clusters: 10 fixed prototype images plus noise; loss floor ≈ 0 (from ln 10).

        Each image is its class's prototype with 25% of the ink dropped and 5% stray ink added;
        two prototypes share only ~3% of their pixels as ink, so the classes lie far apart.
        """
        shape = (batch_size, INPUTS)
        labels = torch.randint(0, CLASSES, (batch_size,), device=device, generator=generator)  # (B,)
        kept = torch.rand(shape, device=device, generator=generator) >= DROPOUT
        stray = torch.rand(shape, device=device, generator=generator) < STRAY
        intensity = 0.5 + 0.5 * torch.rand(shape, device=device, generator=generator)
        pixels = torch.where(stray, intensity, _prototypes(device)[labels] * kept)  # (B, 784)
        return (pixels - MNIST_MEAN) / MNIST_STD, labels

    def sample_spec(self) -> tuple[SampleField, ...]:
        # MNIST's own storage: 8-bit pixels; normalised on the device by batch_from_samples.
        return SampleField("images", (INPUTS,), "uint8"), SampleField("labels", (), "int64", high=CLASSES)

    def samples_from_batch(self, batch: Batch) -> dict[str, torch.Tensor]:
        images, labels = batch
        pixels = images * MNIST_STD + MNIST_MEAN  # back to [0, 1]
        return {"images": (pixels * 255).round().clamp(0, 255).to(torch.uint8), "labels": labels.long()}

    def batch_from_samples(self, samples: Mapping[str, torch.Tensor], generator: torch.Generator) -> Batch:
        pixels = samples["images"].float() / 255  # (B, 784)
        return (pixels - MNIST_MEAN) / MNIST_STD, samples["labels"].long()

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        images, labels = batch
        logits = model(images)  # (B, 10)
        return F.cross_entropy(logits.float(), labels)

    def parameter_count(self) -> int:
        h = self.config.hidden
        return (INPUTS * h + h) + (h * h + h) + (h * CLASSES + CLASSES)

    def forward_flops_per_sample(self) -> int:
        # Three matmuls, 2 FLOPs per multiply-add; bias adds and ReLU are not counted.
        h = self.config.hidden
        return 2 * (INPUTS * h + h * h + h * CLASSES)

    def train_flops_per_sample(self) -> int:
        # 3 x forward, less the input gradient of the first Linear (2·784·h): it reads the data,
        # which needs no gradient, so autograd never computes that matmul.
        return 3 * self.forward_flops_per_sample() - 2 * INPUTS * self.config.hidden

    def describe(self) -> dict[str, Any]:
        return {"inputs": INPUTS, "hidden": self.config.hidden, "classes": CLASSES}


FAMILIES: tuple[Family, ...] = (
    Family(
        name="fc_mnist",
        summary="3-layer fully-connected MNIST classifier (784-h-h-10, ReLU)",
        sizes={
            "default": MLPConfig(hidden=512, default_batch_size=128),
            "debug": MLPConfig(hidden=32, default_batch_size=16),
        },
        default_size="default",
        build=FCMnist,
        options=("hidden",),
    ),
)
