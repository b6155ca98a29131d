"""Recomputation (activation checkpointing) per block: keep a block's inputs, run its forward again
in backward, and trade that compute for the activations' memory. Weight streaming offers it with
``--recompute``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def recompute_in_backward(module: nn.Module) -> None:
    """Keep only the block's inputs; its forward runs again in backward (activation checkpointing).

    The second run must not count twice: buffers a forward updates (BatchNorm's running
    statistics) are put back as the first run left them.
    """
    from torch.utils.checkpoint import checkpoint

    forward = module.forward

    def recomputed(*args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():
            return forward(*args, **kwargs)
        runs = 0

        def run(*inner: Any, **inner_kwargs: Any) -> Any:
            nonlocal runs
            runs += 1
            if runs == 1:
                return forward(*inner, **inner_kwargs)
            kept = [(buffer, buffer.clone()) for buffer in module.buffers()]
            try:
                return forward(*inner, **inner_kwargs)
            finally:
                for buffer, value in kept:
                    buffer.copy_(value)

        return checkpoint(run, *args, use_reentrant=False, **kwargs)

    module.forward = recomputed
