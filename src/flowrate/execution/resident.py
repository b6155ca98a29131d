"""The resident executor: weights, gradients, optimizer state and activations all on the device.

It is the single-device form of Cerebras' layer-pipelined mode and flowrate's default. ``step``
queues one step's work and returns the loss as a device tensor without waiting for it: the
measurement loop decides when to synchronize.
"""

from __future__ import annotations

import torch
from torch import nn

from flowrate.config import Mode, OptimizerName
from flowrate.execution.precision import PrecisionPolicy
from flowrate.problems.base import Batch, Problem


def make_optimizer(
    name: OptimizerName, params: list[nn.Parameter], lr: float, device: torch.device
) -> torch.optim.Optimizer:
    """AdamW (default) or SGD with momentum; fused kernels on CUDA, foreach on the CPU."""
    fused = device.type == "cuda"
    if name is OptimizerName.SGD:
        return torch.optim.SGD(params, lr=lr, momentum=0.9, fused=fused or None)
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.01, fused=fused or None)


class ResidentExecutor:
    """Owns the model's placement, the precision policy and the optimizer for a resident run."""

    def __init__(
        self,
        problem: Problem,
        model: nn.Module,
        policy: PrecisionPolicy,
        mode: Mode,
        optimizer: OptimizerName,
        learning_rate: float,
    ) -> None:
        self.problem = problem
        self.policy = policy
        self.mode = mode
        self.model = model.to(device=policy.device, dtype=policy.weight_dtype)
        self.optimizer: torch.optim.Optimizer | None = None
        self.scaler: torch.amp.GradScaler | None = None
        if mode is Mode.TRAIN:
            self.model.train()
            params = [p for p in self.model.parameters() if p.requires_grad]
            self.optimizer = make_optimizer(optimizer, params, learning_rate, policy.device)
            self.scaler = policy.grad_scaler()
        else:
            self.model.eval()

    def step(self, batch: Batch) -> torch.Tensor:
        """Queue one step on the device; return its loss (a detached device tensor)."""
        if self.optimizer is None:
            return self._infer(batch)
        with self.policy.autocast():
            loss = self.problem.loss(self.model, batch)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    def _infer(self, batch: Batch) -> torch.Tensor:
        with torch.inference_mode(), self.policy.autocast():
            return self.problem.loss(self.model, batch)
