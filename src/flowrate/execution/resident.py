"""The resident executor: weights, gradients, optimizer state and activations all on the device.

It is the single-device form of Cerebras' layer-pipelined mode and flowrate's default. ``step``
queues one step's work and returns the loss as a device tensor without waiting for it: the
measurement loop decides when to synchronize.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from flowrate.config import Mode, OptimizerName
from flowrate.execution.base import Optimizers
from flowrate.execution.precision import PrecisionPolicy
from flowrate.execution.replicated import unwrap
from flowrate.problems.base import Batch, Problem
from flowrate.results.sections import Streaming


def make_optimizer(
    name: OptimizerName, params: list[nn.Parameter], lr: float, device: torch.device
) -> torch.optim.Optimizer:
    """AdamW (default) or SGD with momentum, in PyTorch's fused kernels where it has them.

    Fused kernels exist on CUDA, and on the CPU since PyTorch 2.4 (vectorised and multi-threaded:
    on 2 cores of an AMD EPYC, 2.4 billion AdamW parameters/s against 0.8 for the per-tensor loop).
    The streaming executor's host optimizer is this same function on host tensors, so both
    execution modes compute the same update, bit for bit.
    """
    fused = device.type == "cuda" or has_fused_cpu_optimizers()
    foreach = None if fused else True
    if name is OptimizerName.SGD:
        return torch.optim.SGD(params, lr=lr, momentum=0.9, fused=fused or None, foreach=foreach)
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.01, fused=fused or None, foreach=foreach)


@functools.cache
def has_fused_cpu_optimizers() -> bool:
    """Whether this PyTorch has fused CPU optimizer kernels (2.4 and newer)."""
    try:
        torch.optim.AdamW([nn.Parameter(torch.zeros(1))], lr=0.1, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return False
    return True


class ResidentExecutor:
    """Owns the model's placement, the precision policy and the optimizer for a resident run.

    An Executor (flowrate.execution.base) with nothing to wait for at the end and nothing to report.
    """

    def __init__(
        self,
        problem: Problem,
        model: nn.Module,
        policy: PrecisionPolicy,
        mode: Mode,
        optimizer: OptimizerName | torch.optim.Optimizer,
        learning_rate: float,
        *,
        clip_grad_norm: float | None = None,
        compile: bool = False,
    ) -> None:
        """``optimizer`` names flowrate's optimizer, or is the user's own over ``model``'s
        parameters (a session around the user's loop; ``learning_rate`` is then theirs).
        ``compile`` runs the loss function (forward and loss; backward through AOTAutograd) through
        torch.compile, which compiles on the first step (flowrate.execution.compile)."""
        self.problem = problem
        self._loss = torch.compile(self._eager_loss) if compile else self._eager_loss
        self.clip_grad_norm = clip_grad_norm
        self.policy = policy
        self.mode = mode
        self.model = model.to(device=policy.device, dtype=policy.weight_dtype)
        self.optimizer: torch.optim.Optimizer | None = None
        self.warnings: list[str] = []
        self.scaler: torch.amp.GradScaler | None = None
        if mode is Mode.TRAIN:
            self.model.train()
            if isinstance(optimizer, torch.optim.Optimizer):
                self.optimizer = optimizer
            else:
                params = [p for p in self.model.parameters() if p.requires_grad]
                self.optimizer = make_optimizer(optimizer, params, learning_rate, policy.device)
            self.scaler = policy.grad_scaler()
        else:
            self.model.eval()

    def step(self, batch: Batch) -> torch.Tensor:
        """Queue one step on the device; return its loss (a detached device tensor)."""
        if self.optimizer is None:
            return self._infer(batch)
        return self.update(self._loss(batch))

    def begin_step(self) -> None:
        """Nothing to prepare before a forward: the weights stay on the device."""

    def update(self, loss: torch.Tensor) -> torch.Tensor:
        """Backward from ``loss`` and the optimizer step: the second half of a training step, also
        for a loss computed by the user's own loop (flowrate.session). Inference: the loss, detached."""
        if self.optimizer is None:
            return loss.detach()
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            if self.clip_grad_norm is not None:
                self.scaler.unscale_(self.optimizer)
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_grad_norm)
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            if self.clip_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_grad_norm)
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    def finish(self) -> None:
        """Nothing runs beside the device's queue: the weights are final after the last step."""

    def report(self, timed_steps: int | None = None) -> Streaming | None:
        """A resident run adds no section of its own to the Result."""
        return None

    @contextmanager
    def checkpoint_state(self) -> Iterator[tuple[nn.Module, Optimizers]]:
        """The user's module (outside a data-parallel wrapper) and the optimizer."""
        yield unwrap(self.model), self.optimizer

    def _infer(self, batch: Batch) -> torch.Tensor:
        with torch.inference_mode():
            return self._loss(batch)

    def _eager_loss(self, batch: Batch) -> torch.Tensor:
        with self.policy.autocast():
            return self.problem.loss(self.model, batch)
