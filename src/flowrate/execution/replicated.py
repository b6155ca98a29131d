"""The model of a data-parallel run as the loop calls it, and the user's module inside it."""

from __future__ import annotations

from typing import Any

from torch import nn


class Replicated(nn.Module):
    """The model as a data-parallel run calls it: through DistributedDataParallel while the run
    lasts, directly once it has ended.

    Why not DDP itself: a DDP object that outlives destroy_process_group keeps the gloo group
    alive until the interpreter exits, and tearing gloo down then aborts the process ("terminate
    called without an active exception", pytorch/pytorch#190489) — and a user's loop keeps its
    model. At the end of the run this wrapper lets go of DDP. Like DDP it holds the model as
    ``module`` (state-dict keys start with "module.") and its parameters are the model's.
    """

    ddp: nn.Module | None

    def __init__(self, module: nn.Module, ddp: nn.Module | None) -> None:
        super().__init__()
        self.module = module
        object.__setattr__(self, "ddp", ddp)  # not a submodule: no second copy of the parameters

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        call = self.ddp if self.ddp is not None else self.module
        return call(*args, **kwargs)

    def release(self) -> None:
        object.__setattr__(self, "ddp", None)


def unwrap(model: nn.Module) -> nn.Module:
    """The user's module inside a data-parallel wrapper (what a checkpoint saves), or ``model``."""
    from torch.nn.parallel import DistributedDataParallel

    return model.module if isinstance(model, Replicated | DistributedDataParallel) else model
