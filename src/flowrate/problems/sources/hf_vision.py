"""Image classification with a transformers model (ViT and kin), through vision_tasks.

Pixel values follow the config's channels with ImageNet's statistics (what ViT's image
processor normalises with); costs are counted by ImageClassificationProblem; blocks are found
as for text models (embeddings, each encoder layer, the final norm, the classifier).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from flowrate.errors import ConfigError
from flowrate.problems.base import Problem
from flowrate.problems.sources import hf_model, loader
from flowrate.problems.sources.base import SourceSettings


def image_problem(
    name: str, size: str, config: Any, model_class: Any, settings: SourceSettings, weights: Path | None
) -> Problem:
    from flowrate.problems.sources.vision_tasks import ImageClassificationProblem

    if settings.seq_len is not None:
        raise ConfigError("seq_len", f"{name} reads images: set --image-size")
    if settings.image_size is not None:
        config.image_size = settings.image_size
    side = int(config.image_size)
    patch = getattr(config, "patch_size", None)
    if isinstance(patch, int) and side % patch:
        raise ConfigError(
            "image_size", f"{name} cuts images into {patch}-pixel patches: give a multiple of {patch}"
        )

    def from_config() -> nn.Module:
        return model_class._from_config(config, dtype=torch.float32, attn_implementation="sdpa")

    def build() -> nn.Module:
        if weights is None:
            return from_config()
        with loader.reading_weights(weights):
            return model_class.from_pretrained(
                str(weights),
                config=config,
                local_files_only=True,
                dtype=torch.float32,
                attn_implementation="sdpa",
            )

    meta = hf_model.meta_model(from_config)  # the config's late errors show here, unallocated
    if weights is not None:
        loader.check_weights(weights, meta)

    def blocks(model: nn.Module) -> list[nn.Module]:
        return hf_model.blocks_in_order(model, None)

    problem = ImageClassificationProblem(
        name,
        build,
        image_size=side,
        num_classes=int(config.num_labels),
        channels=int(getattr(config, "num_channels", 3)),
        logits=lambda model, images: model(pixel_values=images).logits,
        blocks=blocks,
        tied=lambda model: hf_model.tied_by_block(blocks(model)),
        default_batch_size=4 if size.startswith("debug") else 32,
        settings={"model_type": config.model_type, "task": "image-classification"},
    )
    problem.size = size
    return problem
