"""The user's own model, as flowrate's Problem: what a session knows of it besides the loop.

A session measures the user's loop, so this Problem builds nothing, makes no batches and computes
no loss: it carries the name, the counts the user declares (FLOPs and tokens per sample), the
parameters counted and the blocks that weight streaming needs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from flowrate.config import OptimizerName
from flowrate.errors import FlowrateError
from flowrate.execution.precision import PrecisionPolicy
from flowrate.problems.base import Batch, Problem


class LoopProblem(Problem):
    """The user's model as flowrate's Problem: its name, counts and blocks (the loop has the rest)."""

    size = "loop"

    def __init__(
        self,
        name: str,
        flops: int | None,
        tokens: int | None,
        blocks: Callable[[nn.Module], list[nn.Module]] | None,
    ) -> None:
        self.name = name
        self.flops = flops or 0
        self.tokens = tokens
        self.declared_blocks = blocks
        self.module: nn.Module | None = None
        self.counted = 0  # trainable parameters, counted before streaming moved them to the host
        self.optimizer: str | None = None

    def build_model(self) -> nn.Module:
        raise FlowrateError("a session measures the user's model; it builds none")

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        raise FlowrateError("a session measures the user's batches; it makes none")

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        raise FlowrateError("a session's loss is computed by the user's loop")

    def parameter_count(self) -> int:
        return self.counted

    def forward_flops_per_sample(self) -> int:
        return self.flops

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        if self.declared_blocks is not None:
            return self.declared_blocks(model)
        return super().blocks(model)

    def block_count(self) -> int | None:
        """How many blocks the user's model declares (None: none, which resident runs allow)."""
        if self.module is None:
            return None
        try:
            return len(self.blocks(self.module))
        except FlowrateError:
            return None

    @property
    def tokens_per_sample(self) -> int | None:
        return self.tokens

    def describe(self) -> dict[str, Any]:
        model = type(self.module).__name__ if self.module is not None else None
        return {"loop": "user", "model": model, "optimizer": self.optimizer}


def forward_under(module: nn.Module, policy: PrecisionPolicy) -> None:
    """Run ``module``'s forward under the policy's autocast (its loss may run outside it)."""
    forward = module.forward

    def autocast_forward(*args: Any, **kwargs: Any) -> Any:
        with policy.autocast():
            return forward(*args, **kwargs)

    module.forward = autocast_forward


def known_optimizer(optimizer: torch.optim.Optimizer) -> OptimizerName | None:
    """The RunConfig name of a user's optimizer, where flowrate has one (its class is recorded too)."""
    if type(optimizer) is torch.optim.AdamW:
        return OptimizerName.ADAMW
    if type(optimizer) is torch.optim.SGD:
        return OptimizerName.SGD
    return None
