"""Image classification over any library model: synthetic images, labels, costs counted once.

ImageClassificationProblem wraps a factory of a library model (timm, torchvision, a transformers
image classifier) as a Problem. Its images have a dataset's per-channel statistics (ImageNet's
unless told) after the usual normalisation; its parameter count is the model's own, built on the
meta device; its FLOPs are what ``torch.utils.flop_counter.FlopCounterMode`` counts for one
sample's forward and training step on the meta device (no memory, no arithmetic), counted once.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from flowrate.errors import ConfigError
from flowrate.problems.base import Batch, Problem
from flowrate.problems.flop_formulas import grouped_conv_backward_flops
from flowrate.problems.sample import SampleField
from flowrate.problems.sources import loader
from flowrate.problems.sources.base import SourceSettings

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
# `flowrate check`'s learnable task, as the zoo's resnet50 makes it: one fixed coarse pattern per
# class (seeded apart from the run's seed), plus per-sample noise and fine texture.
PROTOTYPE_SEED = 0x5EED
PROTOTYPE_SIDE = 8
SAMPLE_NOISE = 0.5
# Samples costs are counted over (then divided by): BatchNorm refuses one sample per channel.
COUNTED = 2

Logits = Callable[[nn.Module, torch.Tensor], torch.Tensor]
Blocks = Callable[[nn.Module], list[nn.Module]]
Tied = Callable[[nn.Module], dict[int, list[nn.Parameter]]]


class ImageClassificationProblem(Problem):
    """A library image classifier: images (B, C, H, W) of dataset statistics, labels (B,)."""

    def __init__(
        self,
        name: str,
        build: Callable[[], nn.Module],
        *,
        image_size: int,
        num_classes: int,
        channels: int = 3,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
        logits: Logits | None = None,
        blocks: Blocks | None = None,
        tied: Tied | None = None,
        default_batch_size: int = 32,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        """``logits(model, images)`` gives (B, classes) logits (default: ``model(images)``; a
        transformers model returns an output object); ``blocks``/``tied`` declare the weight
        streaming blocks and tied parameters; ``settings`` go into describe()."""
        if len(mean) != channels or len(std) != channels:
            raise ValueError(f"{name}: mean and std need one value per channel ({channels})")
        self.name = name
        self._build = build
        self.image_size = image_size
        self.num_classes = loader.checked_classes(num_classes)
        self.channels = channels
        self.mean = tuple(float(m) for m in mean)
        self.std = tuple(float(s) for s in std)
        self._logits = logits
        self._blocks = blocks
        self._tied = tied
        self.default_batch_size = default_batch_size
        self._settings = dict(settings or {})

    # --- the model and its batches ----------------------------------------------------------------

    def build_model(self) -> nn.Module:
        return self._build()

    def logits(self, model: nn.Module, images: torch.Tensor) -> torch.Tensor:
        return model(images) if self._logits is None else self._logits(model, images)

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        side, coarse_side = self.image_size, max(1, self.image_size // 8)
        coarse = torch.randn(
            (batch_size, self.channels, coarse_side, coarse_side), device=device, generator=generator
        )
        texture = torch.randn((batch_size, self.channels, side, side), device=device, generator=generator)
        labels = torch.randint(0, self.num_classes, (batch_size,), device=device, generator=generator)
        return self._dataset_like(coarse, texture), labels  # (B, C, H, W), (B,)

    def learnable_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        """Class clusters: a fixed coarse pattern per class plus noise (as the zoo's resnet50)."""
        side, coarse_side = self.image_size, min(self.image_size, PROTOTYPE_SIDE)
        labels = torch.randint(0, self.num_classes, (batch_size,), device=device, generator=generator)
        noise = torch.randn(
            (batch_size, self.channels, coarse_side, coarse_side), device=device, generator=generator
        )
        prototypes = _prototypes(self.num_classes, self.channels, coarse_side, device)
        coarse = prototypes[labels] + SAMPLE_NOISE * noise
        texture = torch.randn((batch_size, self.channels, side, side), device=device, generator=generator)
        return self._dataset_like(coarse, texture), labels

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        images, labels = batch
        return F.cross_entropy(self.logits(model, images).float(), labels)

    # --- datasets (--data) --------------------------------------------------------------------------

    def sample_spec(self) -> tuple[SampleField, ...]:
        side = self.image_size
        return (
            SampleField("images", (self.channels, side, side), "uint8"),
            SampleField("labels", (), "int64", high=self.num_classes),
        )

    def samples_from_batch(self, batch: Batch) -> dict[str, torch.Tensor]:
        images, labels = batch
        mean, std = _stats(self.mean, self.std, images.device)
        pixels = (images * std + mean) * 255
        return {"images": pixels.round().clamp(0, 255).to(torch.uint8), "labels": labels.long()}

    def batch_from_samples(self, samples: Mapping[str, torch.Tensor], generator: torch.Generator) -> Batch:
        images = samples["images"]  # (B, C, H, W) uint8
        mean, std = _stats(self.mean, self.std, images.device)
        return (images.float() / 255 - mean) / std, samples["labels"].long()

    # --- costs and blocks ----------------------------------------------------------------------------

    def parameter_count(self) -> int:
        return self._meta_costs()[0]

    def forward_flops_per_sample(self) -> int:
        return self._meta_costs()[1]

    def train_flops_per_sample(self) -> int:
        # Counted, not 3 x forward: the first layer computes no gradient for the images.
        return self._meta_costs()[2]

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return super().blocks(model) if self._blocks is None else self._blocks(model)

    def tied_parameters(self, model: nn.Module) -> dict[int, list[nn.Parameter]]:
        return super().tied_parameters(model) if self._tied is None else self._tied(model)

    def describe(self) -> dict[str, Any]:
        return {
            "image_size": self.image_size,
            "classes": self.num_classes,
            "channels": self.channels,
            **self._settings,
        }

    @functools.cache  # noqa: B019 - one problem object per run; its costs never change
    def _meta_costs(self) -> tuple[int, int, int]:
        """(trainable parameters, forward FLOPs, training-step FLOPs) per sample."""
        return count_costs(
            self.build_model,
            lambda device: sample_on(self, device),
            self.loss,
            lambda model, batch: self.logits(model, batch[0]),
        )

    def _dataset_like(self, coarse: torch.Tensor, texture: torch.Tensor) -> torch.Tensor:
        return dataset_like(coarse, texture, self.mean, self.std)


def check_image_settings(spec: str, settings: SourceSettings) -> None:
    """Library image models take --image-size and keyword overrides; not a sequence or a preset."""
    if settings.seq_len is not None:
        raise ConfigError("seq_len", f"{spec} reads images: set --image-size")
    if settings.preset is not None:
        raise ConfigError(
            "size", f"{spec} has no sizes or presets: pass its keywords with --hf-config KEY=VALUE"
        )


def dataset_like(
    coarse: torch.Tensor, texture: torch.Tensor, mean: tuple[float, ...], std: tuple[float, ...]
) -> torch.Tensor:
    """Normalised images from a coarse pattern (B, C, h, w) and fine texture (B, C, H, W): the
    pattern upsampled plus texture, standardised per image and channel, mapped to the dataset's
    pixel statistics and clipped to [0, 1], then normalised: each channel ≈ N(0, 1)."""
    side = texture.shape[-1]
    z = F.interpolate(coarse, size=(side, side), mode="bilinear", align_corners=False) + 0.3 * texture
    z = (z - z.mean(dim=(2, 3), keepdim=True)) / z.std(dim=(2, 3), keepdim=True, correction=0).clamp_min(1e-6)
    m, s = _stats(mean, std, texture.device)
    return ((m + s * z).clamp(0.0, 1.0) - m) / s


def count_costs(
    build: Callable[[], nn.Module],
    sample: Callable[[torch.device], Batch],
    train_loss: Callable[[nn.Module, Batch], torch.Tensor],
    forward: Callable[[nn.Module, Batch], Any],
) -> tuple[int, int, int]:
    """(trainable parameters, forward FLOPs, training-step FLOPs per sample) of a model, for a
    batch of COUNTED samples, counted on the meta device (no memory, no arithmetic), or over a
    real CPU step for a model some op of which meta tensors cannot run.

    Attention is counted through the math backend: model FLOPs, without the Q·Kᵀ that a fused
    kernel's backward computes again.
    """
    try:
        return _count_on(torch.device("meta"), build, sample, train_loss, forward)
    except Exception:  # whatever the meta device cannot run, the CPU can
        return _count_on(torch.device("cpu"), build, sample, train_loss, forward)


def sample_on(problem: Problem, device: torch.device) -> Batch:
    """A batch of COUNTED samples of ``problem``, made on the CPU and moved to ``device``."""
    batch = problem.make_batch(COUNTED, torch.device("cpu"), torch.Generator().manual_seed(0))
    return tuple(t.to(device) for t in batch)


def _count_on(
    device: torch.device,
    build: Callable[[], nn.Module],
    sample: Callable[[torch.device], Batch],
    train_loss: Callable[[nn.Module, Batch], torch.Tensor],
    forward: Callable[[nn.Module, Batch], Any],
) -> tuple[int, int, int]:
    with device:
        model = build()
    batch = sample(device)
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    model.eval()
    # with autograd on: FlopCounterMode's module tracker fails on a parameter passed to a module
    # under no_grad (CaiT's class token); the forward's FLOPs are the same
    with device, _math_attention(), _counter() as counter:
        forward(model, batch)
    forward_flops = int(counter.get_total_flops()) // COUNTED
    model.train()
    with device, _math_attention(), _counter() as counter:
        train_loss(model, batch).backward()
    return params, forward_flops, int(counter.get_total_flops()) // COUNTED


def block_names(model: nn.Module, images: torch.Tensor) -> list[str] | None:
    """Names of the model's blocks in the order its forward calls them (None: the whole model).

    Candidates are the root's children, a Sequential or ModuleList child (stages, transformer
    blocks) giving each of its children; those without parameters are dropped.
    """
    if list(model.parameters(recurse=False)):
        return None  # parameters outside every child: stream the model whole
    candidates: dict[str, nn.Module] = {}
    for name, child in model.named_children():
        if isinstance(child, nn.Sequential | nn.ModuleList) and len(child):
            candidates.update({f"{name}.{sub}": module for sub, module in child.named_children()})
        else:
            candidates[name] = child
    order: list[str] = []
    handles = [
        module.register_forward_pre_hook(_recorder(order, name)) for name, module in candidates.items()
    ]
    try:
        with torch.no_grad():
            model.eval()(images)
    finally:
        for handle in handles:
            handle.remove()
    uncalled = [name for name in candidates if name not in order]
    return [name for name in order + uncalled if any(True for _ in candidates[name].parameters())]


def _recorder(order: list[str], name: str) -> Callable[..., None]:
    def hook(module: nn.Module, args: Any) -> None:
        if name not in order:
            order.append(name)

    return hook


def blocks_by_name(layout: list[str] | None, model: nn.Module) -> list[nn.Module]:
    """The blocks block_names() named, in ``model`` (the whole model when None)."""
    return [model] if layout is None else [model.get_submodule(name) for name in layout]


def _counter() -> FlopCounterMode:
    return FlopCounterMode(
        display=False, custom_mapping={torch.ops.aten.convolution_backward: grouped_conv_backward_flops}
    )


@contextlib.contextmanager
def _math_attention() -> Iterator[None]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        yield


@functools.lru_cache(maxsize=8)
def _prototypes(classes: int, channels: int, side: int, device: torch.device) -> torch.Tensor:
    """(classes, C, side, side) standard-normal patterns, one per class, fixed for good."""
    generator = torch.Generator().manual_seed(PROTOTYPE_SEED)
    return torch.randn((classes, channels, side, side), generator=generator).to(device)


@functools.lru_cache(maxsize=16)
def _stats(
    mean: tuple[float, ...], std: tuple[float, ...], device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel mean and std, each (1, C, 1, 1) on ``device``, made once per device."""
    shape = (1, len(mean), 1, 1)
    return torch.tensor(mean, device=device).view(shape), torch.tensor(std, device=device).view(shape)
