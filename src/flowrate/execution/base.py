"""The Executor protocol: what the harness and a session ask of an execution mode.

Two modes implement it — resident (flowrate.execution.resident) and weight streaming
(flowrate.execution.streaming) — and flowrate.execution.factory builds either from a RunConfig.
Callers hold an ``Executor`` and never ask which mode it is.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

import torch
from torch import nn

from flowrate.problems.base import Batch
from flowrate.results.sections import Streaming

# What a checkpoint saves beside the model: one optimizer, one per block (streaming), or none.
Optimizers = torch.optim.Optimizer | list[torch.optim.Optimizer] | None


class Executor(Protocol):
    """Runs the steps of one model in one execution mode; owns placement, precision and optimizer."""

    warnings: list[str]  # what the Result should say about how the steps ran

    def step(self, batch: Batch) -> torch.Tensor:
        """Queue one whole step; return its loss, a detached device tensor, without waiting."""
        ...

    def begin_step(self) -> None:
        """Before the forward of a step whose loss the caller computes (a session's loop)."""
        ...

    def update(self, loss: torch.Tensor) -> torch.Tensor:
        """The rest of that step: backward and optimizer step when training; the loss, detached."""
        ...

    def finish(self) -> None:
        """After the last step: wait for outstanding work and stop helper threads (idempotent)."""
        ...

    def report(self, timed_steps: int | None = None) -> Streaming | None:
        """The mode's account of the last ``timed_steps`` steps for the Result (None: nothing to add)."""
        ...

    def checkpoint_state(self) -> AbstractContextManager[tuple[nn.Module, Optimizers]]:
        """The model with its master weights in place and its optimizer(s), while a checkpoint saves."""
        ...
