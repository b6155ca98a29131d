"""Launch latency: the time to dispatch a near-empty op, in µs per call.

- ``launch``: ``x.add_(0)`` on a tensor of ``elements`` elements (1 by default; 0 is allowed),
  in place so no allocation is timed. On the CPU the op completes before it returns: a call's
  time is the Python call plus PyTorch's dispatcher plus a one-element loop, the cost every eager
  op pays before it does any work. On CUDA with ``wait=0`` (the default) calls are enqueued back
  to back: a call's time is the host's launch cost (the GPU's work on one element is shorter, so
  the host is the bottleneck). With ``-O wait=1`` each call records a CUDA event after the add and
  waits for it: launch to completion, as a step that synchronises after every op pays it.
- A sample is one call (the kernels' convention): µs per call = 10⁶ / samples/s, and its spread
  is the intervals' spread. ``batch_size`` defaults to 1000 calls per step so the loop's per-step
  bookkeeping, and the one-op loss (a sum over the tensor: there may be no element to copy),
  stay under a thousandth of a step.
- ``-O ops=N``: a model's op calls per step (its precision census's ``op_calls``: the run text's
  "launches" row); the run text then gives the steps/s ceiling from launches alone,
  10⁶ / (N × µs per call): no eager step of that model runs faster on this device.
- FLOPs and bytes are 0: what is measured is time per call, not work.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from flowrate.config import Mode
from flowrate.errors import ConfigError
from flowrate.problems.base import Batch, Family
from flowrate.problems.kernels.base import KernelProblem, call_count, repeat_calls, require_flag


@dataclass(frozen=True)
class LaunchConfig:
    elements: int = 1
    wait: int = 0  # 1: each call waits for its event (CUDA launch to completion)
    ops: int = 0  # a model's op calls per step, for the ceiling; 0: none given

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        for name in ("elements", "ops"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(name, f"must be a non-negative integer, got {value!r}")
        require_flag(self, "wait")


class Launch(KernelProblem):
    """An in-place add of ``elements`` elements, called ``batch_size`` times a step."""

    name = "launch"
    config: LaunchConfig
    default_batch_size = 1000

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        if self.config.wait and device.type != "cuda":
            raise ConfigError(
                "wait",
                f"launch to completion (wait=1) applies to CUDA; on {device.type} every op has "
                "completed when it returns, so wait=0 measures it",
            )
        x = torch.zeros(self.config.elements, device=device, dtype=self.dtype)
        return x, call_count(batch_size)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        x, calls = batch
        if not self.config.wait:
            repeat_calls(calls, lambda: x.add_(0))
            return x.sum()
        event = torch.cuda.Event()

        def call() -> torch.Tensor:
            out = x.add_(0)
            event.record()
            event.synchronize()
            return out

        repeat_calls(calls, call)
        return x.sum()

    def forward_flops_per_sample(self) -> int:
        return 0  # nothing is computed: the figure is time per call

    def bytes_per_sample(self, mode: Mode) -> int | None:
        return None


FAMILIES: tuple[Family, ...] = (
    Family(
        name="launch",
        summary="kernel: dispatch (CPU) or launch (CUDA; -O wait=1: to completion) latency of a tiny add",
        sizes={
            "default": LaunchConfig(),
            "debug": LaunchConfig(),
            "empty": LaunchConfig(elements=0),
        },
        default_size="default",
        build=Launch,
        options=("elements", "wait", "ops"),
    ),
)
