"""Memory a step needs in each execution mode, whether it fits, and what to change when it does not.

From a traced step (flowrate.estimate.trace), with P parameters stored at w bytes each (4; 2 for
pure-bf16) and computed at c bytes (2 under bf16/fp16 autocast, else 4):

- **resident**, on the device: weights P·w, gradients P·w, optimizer state (AdamW 2·P·w, SGD
  momentum P·w), the activations saved for backward, and the working set of the largest op.
  Inference keeps the weights and the working set only.
- **streaming**, on the device: the two largest consecutive blocks' weights in the compute
  precision (the block computing and the next one arriving) and, in training, their gradients;
  the activations (with --recompute, each block's input plus the largest block's activations,
  rebuilt one block at a time); the working set. On the host, P times the bytes per parameter of
  flowrate.execution.host_memory.host_bytes_per_parameter (fp32 master, optimizer state, fp32
  gradient, the compute-precision copy it sends and its gradient staging).

Allocator fragmentation and the CUDA context (a few hundred MB) come on top; a configuration
within 10% of the capacity is called tight.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from flowrate.config import Execution, Mode
from flowrate.estimate.trace import StepTrace
from flowrate.execution.host_memory import host_bytes_per_parameter
from flowrate.units import gib

TIGHT = 0.9  # share of capacity above which a fit is called tight


@dataclass(frozen=True)
class MemoryNeed:
    """What one execution mode keeps, on the device and (streaming) on the host, in bytes."""

    execution: str
    device_bytes: int
    host_bytes: int | None  # streaming only
    parts: dict[str, int]  # device: weights, gradients, optimizer, activations, working set
    available: bool = True  # False: this mode cannot run the problem (no blocks to stream)
    reason: str | None = None


def resident_need(trace: StepTrace) -> MemoryNeed:
    weights = trace.parameters * trace.weight_element_size
    train = trace.mode is Mode.TRAIN
    parts = {
        "weights": weights,
        "gradients": weights if train else 0,
        "optimizer": trace.optimizer_states * weights,
        "activations": trace.saved_bytes,
        "working set": trace.working_bytes,
    }
    return MemoryNeed(Execution.RESIDENT.value, sum(parts.values()), None, parts)


def streaming_need(trace: StepTrace, recompute: bool = False) -> MemoryNeed:
    if trace.blocks is None:
        return MemoryNeed(
            Execution.STREAMING.value, 0, None, {}, False, "the problem declares no blocks to stream"
        )
    sizes = [b.parameters for b in trace.blocks]
    pair = max((a + b for a, b in itertools.pairwise(sizes)), default=sizes[0] if sizes else 0)
    element = trace.compute_element_size
    train = trace.mode is Mode.TRAIN
    activations = trace.saved_bytes
    if recompute and train:
        largest = max(b.saved_bytes for b in trace.blocks)
        activations = sum(b.input_bytes for b in trace.blocks) + largest
    parts = {
        "weights": pair * element,
        "gradients": pair * element if train else 0,
        "optimizer": 0,
        "activations": activations,
        "working set": trace.working_bytes,
    }
    per_parameter = host_bytes_per_parameter(trace.mode, trace.precision, trace.optimizer)
    return MemoryNeed(Execution.STREAMING.value, sum(parts.values()), trace.parameters * per_parameter, parts)


@dataclass(frozen=True)
class Fit:
    """One memory against one capacity."""

    where: str  # "device" or "host"
    need: int
    capacity: float | None

    @property
    def fits(self) -> bool | None:
        return None if self.capacity is None else self.need <= self.capacity

    @property
    def tight(self) -> bool:
        return self.capacity is not None and TIGHT * self.capacity < self.need <= self.capacity

    def describe(self, device: str) -> str:
        """'needs 93.1 GiB, the device (…) has 80 GiB (16% over)'."""
        if self.capacity is None:
            return f"needs {gib(self.need)} on the {self.where}; its capacity is unknown"
        share = self.need / self.capacity - 1
        verdict = f"{share:.0%} over" if share > 0 else f"{self.need / self.capacity:.0%} of it"
        return f"needs {gib(self.need)}, the {self.where} ({device}) has {gib(self.capacity)} ({verdict})"


@dataclass(frozen=True)
class MemoryPlan:
    """Every execution mode's need, and how the chosen one fits."""

    needs: dict[str, MemoryNeed]
    chosen: str
    fits: list[Fit] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(f.fits is not False for f in self.fits)


def plan_memory(
    trace: StepTrace,
    execution: Execution,
    device_capacity: float | None,
    host_capacity: float | None,
    recompute: bool = False,
) -> MemoryPlan:
    needs = {
        Execution.RESIDENT.value: resident_need(trace),
        Execution.STREAMING.value: streaming_need(trace, recompute),
    }
    need = needs[execution.value]
    fits = [Fit("device", need.device_bytes, device_capacity)]
    if need.host_bytes is not None:
        fits.append(Fit("host", need.host_bytes, host_capacity))
    return MemoryPlan(needs, execution.value, fits)


def largest_batch(trace: StepTrace, need: MemoryNeed, capacity: float) -> int:
    """The largest batch size whose need fits ``capacity``: activations and the working set grow
    with the batch, the rest does not. 0 when not even one sample fits."""
    per_sample = (need.parts.get("activations", 0) + need.parts.get("working set", 0)) / trace.batch_size
    fixed = need.device_bytes - per_sample * trace.batch_size
    if per_sample <= 0:
        return trace.batch_size if fixed <= capacity else 0
    return max(0, math.floor((capacity - fixed) / per_sample))


def power_of_two_below(value: int) -> int:
    return 1 << (value.bit_length() - 1) if value > 0 else 0
