"""What flowrate reads off a transformers model: its parameters, its matmuls, its blocks.

Counting happens on a copy built on the meta device (shapes without storage), so a preset of
8 B parameters is counted in a second without allocating its weights.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from flowrate.errors import FlowrateError


def meta_model(build: Callable[[], nn.Module]) -> nn.Module:
    """``build()`` on the meta device: every parameter has its shape and no storage."""
    with torch.device("meta"):
        return build()


def beyond_meta(error: Exception) -> bool:
    """Whether ``error`` says an operation cannot run on the meta device (a kernel without a meta
    implementation, a value read back from a tensor), rather than that the model is wrong."""
    return isinstance(error, NotImplementedError) or "meta" in str(error).lower()


def parameter_count(model: nn.Module) -> int:
    """The model's own count: each parameter once, tied ones included once."""
    return sum(p.numel() for p in model.parameters())


def _is_matmul(module: nn.Module) -> bool:
    # nn.Linear, and GPT-2's Conv1D (a linear layer with its weight transposed)
    return isinstance(module, nn.Linear) or type(module).__name__ == "Conv1D"


def matmul_weights(model: nn.Module, where: Callable[[str], bool] = lambda name: True) -> int:
    """Weights of the model's linear layers whose qualified name ``where`` accepts; each module
    once, so a head tied to the embedding counts (it multiplies) while the lookup does not."""
    return sum(m.weight.numel() for name, m in model.named_modules() if _is_matmul(m) and where(name))


def layer_lists(model: nn.Module) -> list[nn.ModuleList]:
    """The ModuleLists holding the model's layers (decoder layers, encoder layers; T5 has both)."""
    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList) and len(m) and _has_params(m[0])]
    nested = {
        id(inner) for outer in lists for layer in outer for inner in layer.modules() if inner is not layer
    }
    return [m for m in lists if id(m) not in nested]


def _has_params(module: nn.Module) -> bool:
    return any(True for _ in module.parameters())


def candidate_blocks(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Each layer, and each largest module holding parameters outside the layers, in registration
    order (which transformers models follow in forward: embeddings, layers, final norm, head)."""
    layers = {id(layer) for group in layer_lists(model) for layer in group}
    found: list[tuple[str, nn.Module]] = []

    def walk(prefix: str, module: nn.Module) -> None:
        if id(module) in layers or (not _contains(module, layers) and _has_params(module)):
            found.append((prefix, module))
            return
        if any(True for _ in module.parameters(recurse=False)):
            raise FlowrateError(
                f"{type(module).__name__} holds parameters beside its layers: flowrate cannot split it into "
                "blocks for weight streaming; use --execution resident"
            )
        for name, child in module.named_children():
            walk(f"{prefix}.{name}" if prefix else name, child)

    walk("", model)
    return found


def _contains(module: nn.Module, ids: set[int]) -> bool:
    return any(id(m) in ids for m in module.modules())


def called_order(model: nn.Module, names: list[str], run: Callable[[nn.Module], Any]) -> list[str]:
    """``names`` (modules of ``model``) in the order ``run(model)`` first calls them; modules it
    never calls (T5's `shared`, whose weight the encoder's embedding uses) are left out."""
    modules = dict(model.named_modules())
    first: dict[str, int] = {}

    def seen(name: str) -> Callable[[nn.Module, Any], None]:
        def hook(module: nn.Module, args: Any) -> None:
            first.setdefault(name, len(first))

        return hook

    handles = [modules[name].register_forward_pre_hook(seen(name)) for name in names]
    try:
        run(model)
    finally:
        for handle in handles:
            handle.remove()
    return sorted(first, key=first.__getitem__)


def blocks_in_order(model: nn.Module, order: list[str] | None) -> list[nn.Module]:
    """The model's blocks: ``order`` (names from called_order on a copy) or registration order."""
    if order is None:
        return [module for _, module in candidate_blocks(model)]
    modules = dict(model.named_modules())
    return [modules[name] for name in order]


def tied_by_block(blocks: list[nn.Module]) -> dict[int, list[nn.Parameter]]:
    """Parameters a block uses but an earlier block holds (a head tied to the embedding)."""
    seen: set[int] = set()
    tied: dict[int, list[nn.Parameter]] = {}
    for index, block in enumerate(blocks):
        params = list(block.parameters())
        shared = [p for p in params if id(p) in seen]
        if shared:
            tied[index] = shared
        seen.update(id(p) for p in params)
    return tied
