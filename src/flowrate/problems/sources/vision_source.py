"""``torchvision:NAME``: torchvision's classification, detection and segmentation models.

torchvision must be the build made for the installed torch (torch==2.13.0 from PyPI pairs with
torchvision==0.28.0). A build for another torch (PyPI's CUDA torchvision next to a CPU-only
torch) cannot load its compiled operators, and torchvision 0.28 then fails at import: it
registers a fake kernel for ``torchvision::nms`` unconditionally. load_torchvision() declares
those two operators' schemas so the package (and timm, which imports it) loads anyway; models
that call the compiled operators (detection) then say so in one line.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import sys
from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from flowrate.errors import ConfigError, FlowrateError
from flowrate.problems.base import Batch, Problem
from flowrate.problems.sources import loader
from flowrate.problems.sources.base import MissingExtra, SourceSettings
from flowrate.problems.sources.vision_tasks import (
    COUNTED,
    IMAGENET_MEAN,
    IMAGENET_STD,
    PROTOTYPE_SEED,
    SAMPLE_NOISE,
    ImageClassificationProblem,
    block_names,
    blocks_by_name,
    check_image_settings,
    count_costs,
    dataset_like,
    sample_on,
)

PREFIX = "torchvision"
EXTRA = "vision"

# Keeps the stand-in schema definitions alive (a Library's definitions go with it).
_STAND_IN: list[torch.library.Library] = []
# The operators torchvision 0.28's _meta_registrations gives fake kernels whatever happened.
# Models whose default input is not 224 x 224.
_DEFAULT_SIDE = {"inception_v3": 299}
_UNGUARDED_OPS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor qdets, Tensor scores, float iou_threshold) -> Tensor",
)


class TorchvisionOpsMissing(FlowrateError):
    """torchvision is installed but its compiled operators did not load (a build for another torch)."""

    def __init__(self, spec: str) -> None:
        import torchvision  # type: ignore[import-untyped]

        super().__init__(
            f"{spec} needs torchvision's compiled operators, which did not load: torchvision "
            f"{torchvision.__version__} was built for another torch than {torch.__version__}; "
            "install the build made for it (PyPI's torch==2.13.0 pairs with torchvision==0.28.0; "
            "a +cpu torch with the +cpu torchvision of PyTorch's CPU wheel index)"
        )


def load_torchvision() -> ModuleType:
    """torchvision, imported; one whose compiled operators do not load imports too (has_ops()
    tells). Raises ImportError when it is not installed."""
    try:
        import torchvision
    except RuntimeError as error:
        if "torchvision::" not in str(error) or _STAND_IN:
            raise
        _declare_unguarded_ops()
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]  # the half-finished import
        import torchvision
    return torchvision


def has_ops() -> bool:
    """Whether torchvision's compiled operators (nms, roi_align, …) loaded."""
    return bool(load_torchvision().extension._has_ops())


def _declare_unguarded_ops() -> None:
    library = torch.library.Library("torchvision", "FRAGMENT")
    for schema in _UNGUARDED_OPS:
        library.define(schema)
    _STAND_IN.append(library)


def build_problem(name: str, settings: SourceSettings) -> Problem:
    loader.require_name(PREFIX, name, "resnet18")
    spec = f"torchvision:{name}"
    check_image_settings(spec, settings)
    try:
        tv = load_torchvision()
    except ImportError as error:
        raise MissingExtra(spec, EXTRA) from error
    task = _task(tv, name)
    return loader.build(
        spec,
        settings.overrides,
        lambda overrides: _problem(tv, name, task, dataclasses.replace(settings, overrides=overrides)),
    )


def _problem(tv: ModuleType, name: str, task: str, settings: SourceSettings) -> Problem:
    """The problem of torchvision:NAME with these keywords, its model built on the meta device
    (where a keyword the model cannot take shows, unallocated)."""
    spec = f"torchvision:{name}"
    kwargs: dict[str, Any] = {
        key: loader.constructor_value(key, text) for key, text in settings.overrides.items()
    }
    if task != "classification":
        kwargs.setdefault("weights_backbone", None)  # their default would download ImageNet weights
    image_size = settings.image_size or _DEFAULT_SIDE.get(name, 224)
    if task == "detection":
        if not has_ops():
            raise TorchvisionOpsMissing(spec)
        kwargs.setdefault("num_classes", 91)  # COCO's, as torchvision's detectors
        kwargs.update(min_size=image_size, max_size=image_size)  # else images are resized to 800
        build = functools.partial(_create, tv, name, kwargs)
        with torch.device("meta"):
            build()  # a keyword the detector cannot take shows here
        return DetectionProblem(
            spec,
            build,
            image_size=image_size,
            classes=int(kwargs["num_classes"]),
            name=name,
        )
    if name.startswith("vit_") and settings.image_size is not None:
        kwargs["image_size"] = image_size
    build = functools.partial(_create, tv, name, kwargs)
    with torch.device("meta"):
        model = build()
    sample = torch.zeros((COUNTED, 3, image_size, image_size), device="meta")
    layout = block_names(model, sample)
    if task == "segmentation":
        classes = int(kwargs.get("num_classes", 21))  # torchvision's default: Pascal VOC's
        return SegmentationProblem(
            spec, build, image_size, classes, functools.partial(blocks_by_name, layout)
        )
    classes = int(getattr(model, "num_classes", 0) or kwargs.get("num_classes", 1000))
    return ImageClassificationProblem(
        spec,
        build,
        image_size=image_size,
        num_classes=classes,
        logits=_logits,
        blocks=functools.partial(blocks_by_name, layout),
        settings={"source": "torchvision", "model": name},
    )


def list_names() -> list[tuple[str, str]]:
    tv = load_torchvision()
    return [(name, f"torchvision {task} model (random weights)") for name, task in _names(tv).items()]


def _names(tv: ModuleType) -> dict[str, str]:
    """Every supported model name and its task."""
    models = tv.models
    names = dict.fromkeys(models.list_models(module=models), "classification")
    names.update(dict.fromkeys(models.list_models(module=models.segmentation), "segmentation"))
    names.update(dict.fromkeys(models.list_models(module=models.detection), "detection"))
    return names


def _task(tv: ModuleType, name: str) -> str:
    names = _names(tv)
    if name not in names:
        close = difflib.get_close_matches(name, list(names), n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        raise ConfigError(
            "problem", f"unknown torchvision model {name!r}{hint}; see `flowrate list --source torchvision`"
        )
    return names[name]


def _create(tv: ModuleType, name: str, kwargs: dict[str, Any]) -> nn.Module:
    model: nn.Module = tv.models.get_model(name, weights=None, **kwargs)
    return model


def _logits(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    # Inception and GoogLeNet return (logits, aux logits…) while training: the logits count.
    out = model(images)
    return out if isinstance(out, torch.Tensor) else out.logits


class SegmentationProblem(Problem):
    """Semantic segmentation: images and a class per pixel (regions of one class), in range."""

    def __init__(self, name: str, build: Any, image_size: int, classes: int, blocks: Any) -> None:
        self.name, self._build, self.image_size = name, build, image_size
        self.classes = loader.checked_classes(classes)
        self._blocks = blocks
        self.default_batch_size = 8

    def build_model(self) -> nn.Module:
        return self._build()

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        side, coarse = self.image_size, max(1, self.image_size // 8)
        images = _images(batch_size, side, device, generator)
        regions = torch.randint(
            0, self.classes, (batch_size, 1, coarse, coarse), device=device, generator=generator
        )
        masks = F.interpolate(regions.float(), size=(side, side), mode="nearest").long()[:, 0]
        return images, masks  # (B, 3, H, W), (B, H, W) in [0, classes)

    def learnable_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        """Coloured regions: each pixel is its class's fixed colour plus noise.

        The masks are make_batch's; a pixel's label is predictable from the image."""
        _, masks = self.make_batch(batch_size, device, generator)
        noise = torch.randn((batch_size, 3, *masks.shape[1:]), device=device, generator=generator)
        colours = _colours(self.classes, device)  # (classes, 3)
        return colours[masks].permute(0, 3, 1, 2) + SAMPLE_NOISE * noise, masks

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        images, masks = batch
        out = model(images)
        loss = F.cross_entropy(out["out"].float(), masks)
        if "aux" in out:  # torchvision's reference training weighs the auxiliary head by 0.5
            loss = loss + 0.5 * F.cross_entropy(out["aux"].float(), masks)
        return loss

    def parameter_count(self) -> int:
        return self._costs()[0]

    def forward_flops_per_sample(self) -> int:
        return self._costs()[1]

    def train_flops_per_sample(self) -> int:
        return self._costs()[2]

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return self._blocks(model)

    def describe(self) -> dict[str, Any]:
        return {"image_size": self.image_size, "classes": self.classes, "source": "torchvision"}

    @functools.cache  # noqa: B019 - one problem object per run; its costs never change
    def _costs(self) -> tuple[int, int, int]:
        return count_costs(
            self.build_model,
            lambda device: sample_on(self, device),
            self.loss,
            lambda model, batch: model(batch[0]),
        )


class DetectionProblem(Problem):
    """Object detection: images with OBJECTS boxes each (labels in [1, classes), masks for Mask
    R-CNN, keypoints for Keypoint R-CNN), all inside the image. The model streams as one block.

    FLOPs depend on the data (proposals kept, detections): they are counted once on the CPU for
    one synthetic image, in the mode asked.
    """

    OBJECTS = 4

    def __init__(self, spec: str, build: Any, *, image_size: int, classes: int, name: str) -> None:
        self.name, self._build, self.image_size = spec, build, image_size
        self.classes = loader.checked_classes(classes, least=2)  # labels are drawn from [1, classes)
        self.masks, self.keypoints = name.startswith("maskrcnn"), name.startswith("keypointrcnn")
        self.default_batch_size = 2

    def build_model(self) -> nn.Module:
        return self._build()

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        b, k, side = batch_size, self.OBJECTS, self.image_size
        images = _images(b, side, device, generator)
        corner = torch.rand((b, k, 2), device=device, generator=generator) * side * 0.6
        size = (0.15 + 0.25 * torch.rand((b, k, 2), device=device, generator=generator)) * side
        boxes = torch.cat([corner, (corner + size).clamp(max=side - 1)], dim=-1)  # (B, K, 4) x1 y1 x2 y2
        labels = torch.randint(1, self.classes, (b, k), device=device, generator=generator)
        fields = [images, boxes, labels]
        if self.masks:
            grid = torch.arange(side, device=device).float()
            inside_x = (grid >= boxes[..., 0:1]) & (grid <= boxes[..., 2:3])  # (B, K, W)
            inside_y = (grid >= boxes[..., 1:2]) & (grid <= boxes[..., 3:4])  # (B, K, H)
            fields.append((inside_y[..., :, None] & inside_x[..., None, :]).to(torch.uint8))
        if self.keypoints:
            at = torch.rand((b, k, 17, 2), device=device, generator=generator)
            xy = boxes[..., None, :2] + at * (boxes[..., None, 2:] - boxes[..., None, :2])
            fields.append(torch.cat([xy, torch.ones_like(xy[..., :1])], dim=-1))  # (B, K, 17, 3) visible
        return tuple(fields)

    def learnable_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        """Coloured boxes: each object's box is filled with its label's fixed colour plus noise.

        The objects are make_batch's (later boxes painted over earlier), so boxes and labels
        follow the image."""
        images, boxes, labels, *rest = self.make_batch(batch_size, device, generator)
        grid = torch.arange(self.image_size, device=device).float()
        colours = _colours(self.classes, device)[labels]  # (B, K, 3)
        noise = SAMPLE_NOISE * torch.randn(images.shape, device=device, generator=generator)
        for k in range(self.OBJECTS):
            inside_x = (grid >= boxes[:, k, 0:1]) & (grid <= boxes[:, k, 2:3])  # (B, W)
            inside_y = (grid >= boxes[:, k, 1:2]) & (grid <= boxes[:, k, 3:4])  # (B, H)
            inside = (inside_y[:, :, None] & inside_x[:, None, :])[:, None]  # (B, 1, H, W)
            images = torch.where(inside, colours[:, k, :, None, None] + noise, images)
        return (images, boxes, labels, *rest)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        images = list(batch[0])
        if not model.training:  # detections, no losses: a scalar of their scores
            return torch.stack([d["scores"].sum() for d in model(images)]).sum()
        keys = ["boxes", "labels"] + ["masks"] * self.masks + ["keypoints"] * self.keypoints
        targets = [dict(zip(keys, fields, strict=True)) for fields in zip(*batch[1:], strict=True)]
        return torch.stack(list(model(images, targets).values())).sum()

    def parameter_count(self) -> int:
        with torch.device("meta"):
            return sum(p.numel() for p in self._build().parameters() if p.requires_grad)

    def forward_flops_per_sample(self) -> int:
        return self._counted(train=False)

    def train_flops_per_sample(self) -> int:
        return self._counted(train=True)

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return [model]

    def describe(self) -> dict[str, Any]:
        return {"image_size": self.image_size, "objects": self.OBJECTS, "source": "torchvision"}

    @functools.cache  # noqa: B019 - one problem object per run; its costs never change
    def _counted(self, train: bool) -> int:
        torch.manual_seed(0)
        model = self.build_model().train(train)
        batch = self.make_batch(1, torch.device("cpu"), torch.Generator().manual_seed(0))
        with FlopCounterMode(display=False) as counter, torch.set_grad_enabled(train):
            loss = self.loss(model, batch)
            if train:
                loss.backward()
        return int(counter.get_total_flops())


def _colours(classes: int, device: torch.device) -> torch.Tensor:
    """(classes, 3) standard-normal colours, one per class, fixed for good (apart from the run's seed)."""
    generator = torch.Generator().manual_seed(PROTOTYPE_SEED)
    return torch.randn((classes, 3), generator=generator).to(device)


def _images(batch_size: int, side: int, device: torch.device, generator: torch.Generator) -> torch.Tensor:
    coarse = torch.randn(
        (batch_size, 3, max(1, side // 8), max(1, side // 8)), device=device, generator=generator
    )
    texture = torch.randn((batch_size, 3, side, side), device=device, generator=generator)
    return dataset_like(coarse, texture, IMAGENET_MEAN, IMAGENET_STD)
