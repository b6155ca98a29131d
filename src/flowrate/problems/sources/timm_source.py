"""``timm:NAME``: any model of ``timm.list_models()``, with random weights (pretrained=False, offline).

The image size is ``--image-size`` or the model's own (its pretrained_cfg), passed to models that
take one (ViTs); overrides (``key=value``) are create_model's keyword arguments, e.g. ``depth=2``.
The images follow the model's normalisation statistics. Weight streaming blocks are found from
the order the model calls its children (each stage or transformer block of a container on its
own); a ViT's class, register and position tokens become a block of their own, and a model
whose root holds other parameters streams as one block.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
from collections.abc import Mapping
from types import MethodType, ModuleType
from typing import Any

import torch
from torch import nn

from flowrate.errors import ConfigError
from flowrate.problems.base import Problem
from flowrate.problems.sources import loader
from flowrate.problems.sources.base import MissingExtra, SourceSettings
from flowrate.problems.sources.vision_source import load_torchvision
from flowrate.problems.sources.vision_tasks import (
    ImageClassificationProblem,
    block_names,
    blocks_by_name,
    check_image_settings,
)

PREFIX = "timm"
EXTRA = "timm"


def build_problem(name: str, settings: SourceSettings) -> Problem:
    loader.require_name(PREFIX, name, "resnet18")
    check_image_settings(f"timm:{name}", settings)
    timm = library(name)
    if not timm.is_model(name):
        close = difflib.get_close_matches(name, timm.list_models(), n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        raise ConfigError("problem", f"unknown timm model {name!r}{hint}; see `flowrate list --source timm`")
    return loader.build(
        f"timm:{name}",
        settings.overrides,
        lambda overrides: _problem(timm, name, dataclasses.replace(settings, overrides=overrides)),
    )


def _problem(timm: ModuleType, name: str, settings: SourceSettings) -> Problem:
    """The problem of timm:NAME with these keywords, its model built and run on the meta device
    (where a keyword the model cannot run with shows, unallocated)."""
    kwargs = {key: loader.constructor_value(key, text) for key, text in settings.overrides.items()}
    config = timm.get_pretrained_cfg(name)
    channels = int(kwargs.get("in_chans", config.input_size[0] if config else 3))
    image_size = settings.image_size or (config.input_size[-1] if config else 224)
    if settings.image_size is not None and _takes_img_size(timm, name, kwargs):
        kwargs["img_size"] = settings.image_size
    build = functools.partial(_create, timm, name, kwargs)
    with torch.device("meta"):
        model = build()
    mean, std = _statistics(config, channels)
    try:
        layout = block_names(model, torch.zeros((1, channels, image_size, image_size), device="meta"))
    except Exception:  # a forward the meta device cannot run, or one the overrides broke
        if settings.overrides:
            raise  # loader.build names the keyword
        layout = None  # stream the model whole
    problem = ImageClassificationProblem(
        f"timm:{name}",
        build,
        image_size=image_size,
        num_classes=int(getattr(model, "num_classes", 0)) or int(kwargs.get("num_classes", 1000)),
        channels=channels,
        mean=mean,
        std=std,
        blocks=functools.partial(blocks_by_name, layout),
        settings={"source": "timm", "model": name, "timm_kwargs": {k: repr(v) for k, v in kwargs.items()}},
    )
    problem.size = "custom" if settings.overrides else "default"
    return problem


def list_names() -> list[tuple[str, str]]:
    timm = library()
    return [(name, "timm image classifier (random weights)") for name in timm.list_models()]


def library(spec: str = "timm:…") -> ModuleType:
    """timm, imported (MissingExtra when it is not installed)."""
    # timm imports torchvision: this lets a build without its operators load (a missing one:
    # timm's own import below says so)
    with contextlib.suppress(ImportError):
        load_torchvision()
    try:
        import timm
    except ImportError as error:
        raise MissingExtra(f"timm:{spec}" if ":" not in spec else spec, EXTRA) from error
    return timm


def _create(timm: ModuleType, name: str, kwargs: Mapping[str, Any]) -> nn.Module:
    model: nn.Module = timm.create_model(name, pretrained=False, **kwargs)
    _tokens_as_block(model)
    return model


def _takes_img_size(timm: ModuleType, name: str, kwargs: Mapping[str, Any]) -> bool:
    """Whether the model's constructor has an image size (ViTs do; convnets take any size)."""
    with torch.device("meta"):
        try:
            timm.create_model(name, pretrained=False, img_size=224, **kwargs)
        except TypeError:
            return False
    return True


def _statistics(config: Any, channels: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    mean = tuple(getattr(config, "mean", ())) or (0.5,) * channels
    std = tuple(getattr(config, "std", ())) or (0.5,) * channels
    if len(mean) != channels:  # in_chans changed: one grey statistic per channel
        mean, std = (sum(mean) / len(mean),) * channels, (sum(std) / len(std),) * channels
    return mean, std


class _Tokens(nn.Module):
    """A timm ViT's class, register and position tokens as a module: its forward is the ViT's own
    ``_pos_embed``, so weight streaming has the tokens on the device while they are added."""

    def __init__(self, vit: nn.Module) -> None:
        super().__init__()
        self._add_tokens = MethodType(type(vit)._pos_embed, vit)  # type: ignore[attr-defined]
        for name, param in list(vit.named_parameters(recurse=False)):
            del vit._parameters[name]
            self.register_parameter(name, param)
            object.__setattr__(vit, name, param)  # the ViT's code still reads vit.cls_token

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._add_tokens(x)


def _tokens_as_block(model: nn.Module) -> None:
    """Move a ViT's root parameters (tokens) into a _Tokens child that its forward calls."""
    if not hasattr(type(model), "_pos_embed") or not list(model.parameters(recurse=False)):
        return
    tokens = _Tokens(model)
    model.add_module("tokens", tokens)
    object.__setattr__(model, "_pos_embed", tokens)  # an instance attribute wins over the method
