"""resnet50: ResNet-50 v1.5 image classification (He et al. 2016), written here without torchvision.

Bottleneck blocks [3, 4, 6, 3] with the stride on the 3x3 convolution (the "v1.5" variant that
torchvision and NVIDIA's reference use), BatchNorm after every convolution, 1000 classes at
224 x 224: 25,557,032 parameters, ≈ 8.2 GFLOPs per image forward.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from flowrate.errors import ConfigError
from flowrate.problems.base import Batch, Family, Problem
from flowrate.problems.sample import SampleField

EXPANSION = 4  # a bottleneck's output has 4x the channels of its 3x3 convolution
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# The learnable task of `flowrate check`: one fixed coarse pattern (at most 8 x 8 per channel,
# upsampled) per class, seeded apart from the run's seed so every batch and every run shares
# them; samples add SAMPLE_NOISE to the pattern and the fine texture of make_batch.
PROTOTYPE_SEED = 0x5EED
PROTOTYPE_SIDE = 8
SAMPLE_NOISE = 0.5


@dataclass(frozen=True)
class ResNetConfig:
    # Bottleneck blocks per stage.
    stages: tuple[int, ...] = (3, 4, 6, 3)
    # Channels of the stem (and of the first stage's 3x3 convolutions).
    base_width: int = 64
    classes: int = 1000
    # Side of the square input image in pixels.
    image_size: int = 224
    # Batch size used when the user gives none.
    default_batch_size: int = 32

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        for field in ("base_width", "classes", "image_size"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(field, f"must be a positive integer, got {value!r}")
        if not self.stages or min(self.stages) <= 0:
            raise ConfigError("stages", f"must be positive block counts, got {self.stages!r}")


def _out(side: int, kernel: int, stride: int, padding: int) -> int:
    """Output side of a convolution or pooling window."""
    return (side + 2 * padding - kernel) // stride + 1


def _plan(config: ResNetConfig) -> Iterator[tuple[int, int, int]]:
    """(input channels, 3x3 channels, stride) of every bottleneck, in order."""
    inplanes = config.base_width
    for stage, blocks in enumerate(config.stages):
        planes = config.base_width * 2**stage
        for index in range(blocks):
            yield inplanes, planes, 2 if stage > 0 and index == 0 else 1
            inplanes = planes * EXPANSION


def _convolutions(config: ResNetConfig) -> Iterator[tuple[int, int, int, int]]:
    """(in channels, out channels, kernel, output side) of every convolution, walking the spec."""
    side = _out(config.image_size, 7, 2, 3)
    yield 3, config.base_width, 7, side  # stem
    side = _out(side, 3, 2, 1)  # max pool
    for inplanes, planes, stride in _plan(config):
        out = _out(side, 3, stride, 1)
        yield inplanes, planes, 1, side
        yield planes, planes, 3, out
        yield planes, planes * EXPANSION, 1, out
        if stride != 1 or inplanes != planes * EXPANSION:
            yield inplanes, planes * EXPANSION, 1, _out(side, 1, stride, 0)  # downsample
        side = out


def _features(config: ResNetConfig) -> int:
    """Channels after the last stage: the classifier's input width (2048 for ResNet-50)."""
    return config.base_width * 2 ** (len(config.stages) - 1) * EXPANSION


def _conv_bn(inputs: int, outputs: int, kernel: int, stride: int = 1) -> nn.Sequential:
    conv = nn.Conv2d(inputs, outputs, kernel, stride, padding=kernel // 2, bias=False)
    return nn.Sequential(conv, nn.BatchNorm2d(outputs))


class Stem(nn.Module):
    """7x7/2 convolution, BatchNorm, ReLU, 3x3/2 max pool: (B, 3, H, W) -> (B, w, H/4, W/4)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
        self.bn = nn.BatchNorm2d(width)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        # Cast the images to the weights' dtype so a model cast to bf16 accepts fp32 images.
        x = F.relu(self.bn(self.conv(images.to(self.conv.weight.dtype))))  # (B, w, H/2, W/2)
        return F.max_pool2d(x, kernel_size=3, stride=2, padding=1)  # (B, w, H/4, W/4)


class Bottleneck(nn.Module):
    """1x1 -> 3x3 (the stride sits here: v1.5) -> 1x1, plus the shortcut.

    (B, Cin, H, W) -> (B, 4p, H/s, W/s), with p the 3x3 channels and s the stride.
    """

    def __init__(self, inplanes: int, planes: int, stride: int) -> None:
        super().__init__()
        self.reduce = _conv_bn(inplanes, planes, 1)
        self.spatial = _conv_bn(planes, planes, 3, stride)
        self.expand = _conv_bn(planes, planes * EXPANSION, 1)
        needs_projection = stride != 1 or inplanes != planes * EXPANSION
        self.downsample = _conv_bn(inplanes, planes * EXPANSION, 1, stride) if needs_projection else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.reduce(x))  # (B, p, H, W)
        y = F.relu(self.spatial(y))  # (B, p, H/s, W/s)
        y = self.expand(y)  # (B, 4p, H/s, W/s)
        shortcut = x if self.downsample is None else self.downsample(x)
        return F.relu(y + shortcut)


class Head(nn.Module):
    """Global average pool and the classifier: (B, C, h, w) -> logits (B, classes)."""

    def __init__(self, channels: int, classes: int) -> None:
        super().__init__()
        self.fc = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.mean(dim=(2, 3)))  # (B, C) -> (B, classes)


class ResNet(nn.Module):
    """blocks = [stem, bottleneck_0 … bottleneck_{n-1}, head]; each block's output is the next
    one's only input: images (B, 3, H, W) -> feature maps -> logits (B, classes)."""

    def __init__(self, config: ResNetConfig) -> None:
        super().__init__()
        bottlenecks = [Bottleneck(*spec) for spec in _plan(config)]
        self.blocks = nn.ModuleList(
            [Stem(config.base_width), *bottlenecks, Head(_features(config), config.classes)]
        )
        # torchvision's initialisation (Kaiming-normal fan-out convolutions, BatchNorm at (1, 0)),
        # and a N(0, 0.01) classifier as in Goyal et al. 2017, so the initial loss ≈ ln(classes).
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, mean=0.0, std=0.01)
                nn.init.zeros_(module.bias)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images  # (B, 3, H, W)
        for block in self.blocks:
            x = block(x)
        return x  # (B, classes)


@functools.lru_cache(maxsize=8)
def _prototypes(classes: int, side: int, device: torch.device) -> torch.Tensor:
    """(classes, 3, side, side) standard-normal patterns, one per class, fixed for good."""
    generator = torch.Generator().manual_seed(PROTOTYPE_SEED)
    return torch.randn((classes, 3, side, side), generator=generator).to(device)


class ResNet50(Problem):
    name = "resnet50"

    def __init__(self, config: ResNetConfig) -> None:
        self.config = config
        self.default_batch_size = config.default_batch_size

    def build_model(self) -> nn.Module:
        return ResNet(self.config)

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        c = self.config
        side = c.image_size
        # Smooth structure (noise at 1/8 resolution, upsampled) plus fine texture (_imagenet_like)
        coarse = torch.randn(
            (batch_size, 3, max(1, side // 8), max(1, side // 8)),
            device=device,
            generator=generator,
        )
        texture = torch.randn((batch_size, 3, side, side), device=device, generator=generator)
        images = _imagenet_like(coarse, texture)  # (B, 3, H, W)
        labels = torch.randint(0, c.classes, (batch_size,), device=device, generator=generator)
        return images, labels

    def learnable_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        """Class clusters: a fixed coarse pattern per class plus noise; loss floor ≈ 0 (from ln classes).

        The patterns are 3 x 8 x 8 standard normals (192 numbers, ≈ 20 apart between classes);
        per-sample noise of 0.5 per number and fine texture leave every class distinct. The
        images then get make_batch's standardisation, so their statistics are ImageNet's.
        """
        c = self.config
        side = c.image_size
        coarse_side = min(side, PROTOTYPE_SIDE)
        labels = torch.randint(0, c.classes, (batch_size,), device=device, generator=generator)  # (B,)
        noise = torch.randn((batch_size, 3, coarse_side, coarse_side), device=device, generator=generator)
        coarse = _prototypes(c.classes, coarse_side, device)[labels] + SAMPLE_NOISE * noise
        texture = torch.randn((batch_size, 3, side, side), device=device, generator=generator)
        return _imagenet_like(coarse, texture), labels  # images (B, 3, H, W), labels (B,)

    def sample_spec(self) -> tuple[SampleField, ...]:
        # Decoded 8-bit RGB, channels first: 4x fewer bytes to copy to the device than fp32, and
        # the normalisation runs there (batch_from_samples).
        c = self.config
        side = c.image_size
        return (
            SampleField("images", (3, side, side), "uint8"),
            SampleField("labels", (), "int64", high=c.classes),
        )

    def samples_from_batch(self, batch: Batch) -> dict[str, torch.Tensor]:
        images, labels = batch
        mean, std = _channel_stats(images.device)
        pixels = images * std + mean  # back to [0, 1]
        return {"images": (pixels * 255).round().clamp(0, 255).to(torch.uint8), "labels": labels.long()}

    def batch_from_samples(self, samples: Mapping[str, torch.Tensor], generator: torch.Generator) -> Batch:
        images = samples["images"]  # (B, 3, H, W) uint8
        mean, std = _channel_stats(images.device)
        return (images.float() / 255 - mean) / std, samples["labels"].long()

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        images, labels = batch
        logits = model(images)  # (B, classes)
        return F.cross_entropy(logits.float(), labels)

    def parameter_count(self) -> int:
        convs = sum(cin * cout * k * k for cin, cout, k, _ in _convolutions(self.config))
        norms = sum(2 * cout for _, cout, _, _ in _convolutions(self.config))  # one per conv
        channels = _features(self.config)
        return convs + norms + channels * self.config.classes + self.config.classes

    def forward_flops_per_sample(self) -> int:
        # 2·Cin·Cout·k²·H_out·W_out per convolution (2 FLOPs per multiply-add) plus 2·C·classes for
        # the classifier, walking the architecture's stages and output sizes. BatchNorm, ReLU,
        # pooling and the residual adds are not counted (nor does FlopCounterMode count them).
        convs = sum(2 * cin * cout * k * k * side * side for cin, cout, k, side in _convolutions(self.config))
        return convs + 2 * _features(self.config) * self.config.classes

    def train_flops_per_sample(self) -> int:
        # 3 x forward, less the stem convolution's input gradient (as many FLOPs as its forward):
        # the stem reads the images, which need no gradient, so autograd never computes it.
        cin, cout, k, side = next(_convolutions(self.config))
        return 3 * self.forward_flops_per_sample() - 2 * cin * cout * k * k * side * side

    def describe(self) -> dict[str, Any]:
        c = self.config
        return {
            "image_size": c.image_size,
            "stages": list(c.stages),
            "base_width": c.base_width,
            "classes": c.classes,
        }


FAMILIES: tuple[Family, ...] = (
    Family(
        name="resnet50",
        summary="ResNet-50 v1.5 image classifier (bottlenecks [3, 4, 6, 3], BatchNorm)",
        sizes={
            "default": ResNetConfig(),
            "debug": ResNetConfig(
                stages=(1, 1, 1, 1), base_width=8, classes=10, image_size=32, default_batch_size=4
            ),
        },
        default_size="default",
        build=ResNet50,
        options=("image_size",),
        sample_shape_option="image_size",
    ),
)


def _imagenet_like(coarse: torch.Tensor, texture: torch.Tensor) -> torch.Tensor:
    """Normalised images from a coarse pattern (B, 3, h, w) and fine texture (B, 3, H, W).

    The upsampled pattern plus texture is standardised per image and channel, mapped to
    ImageNet's pixel statistics and clipped to [0, 1]; after the usual normalisation each channel
    is ≈ N(0, 1), as real inputs are.
    """
    side = texture.shape[-1]
    z = F.interpolate(coarse, size=(side, side), mode="bilinear", align_corners=False) + 0.3 * texture
    z = (z - z.mean(dim=(2, 3), keepdim=True)) / z.std(dim=(2, 3), keepdim=True, correction=0).clamp_min(1e-6)
    mean, std = _channel_stats(texture.device)
    pixels = (mean + std * z).clamp(0.0, 1.0)
    return (pixels - mean) / std


@functools.lru_cache(maxsize=8)
def _channel_stats(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """ImageNet's per-channel mean and standard deviation, each (1, 3, 1, 1) on ``device``; made once
    per device, so converting a batch in the timed loop copies nothing from the host."""
    mean = torch.tensor(IMAGENET_MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, device=device).view(1, 3, 1, 1)
    return mean, std
