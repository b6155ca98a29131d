"""Weight streaming's blocks: which module holds which parameter, which blocks stay resident.

A model streams when its declared blocks (Problem.blocks) hold every parameter, each block once.
A parameter registered in two blocks is used by the later one with the earlier one's weights (a
tie): allowed between adjacent blocks, or when the problem declares it (Problem.tied_parameters,
e.g. an LM head reusing the token embedding); anything else is refused, in one line, before the
first step.

Resident blocks (``--resident-blocks``) stay on the device with a device optimizer, so the step
boundary is not serial: the last block's gradients and the first block's weights are needed back
to back (the end of one step, the start of the next), and a streamed block there would wait for
copy out, host update and copy in with the device idle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from flowrate.errors import ConfigError, FlowrateError
from flowrate.execution.flat_params import BlockBuffers, FlatGroup
from flowrate.execution.host_memory import HostArena
from flowrate.problems.base import Problem

# A resident block costs its weights, gradients and optimizer state on the device: 16 bytes per
# parameter with AdamW (fp32 weight, gradient and two moments). "auto" keeps the end blocks that
# fit in 1/8 of the device's memory: gpt-1.3b's embeddings (8% of its parameters, 1.6 GB) fit on
# a 16 GiB budget and leave 7/8 for the streamed blocks and the activations, while any model that
# needs streaming at all keeps most of its parameters streamed.
RESIDENT_SHARE = 8
RESIDENT_BYTES_PER_PARAMETER = 16


@dataclass
class Block:
    """One declared block: what it owns, what it uses of others, and its streaming state."""

    index: int
    module: nn.Module
    owned: list[nn.Parameter]  # registered here first: this block's weights, updated with it
    tied: list[nn.Parameter]  # used here, owned by another block
    needs: list[int] = field(default_factory=list)  # other blocks whose weights it uses
    resident: bool = False
    groups: list[FlatGroup] = field(default_factory=list)
    buffers: BlockBuffers | None = None  # streamed: its device buffers
    arena: HostArena = field(default_factory=HostArena)
    optimizer: Any = None  # BlockOptimizer (streamed) or a device torch optimizer (resident)
    present: bool = False  # streamed: its weights are on the device (or on their way)
    copied: Any = None  # CUDA event of its copy in that the compute stream has not waited for
    grads_out: Any = None  # CUDA event: its gradients have landed on the host
    landed: bool = False  # its gradients of this step are (on their way) in host memory
    waiting: int = 0  # trainable parameters whose gradient has not arrived this step
    ran: bool = False  # its forward ran in this step

    @property
    def weight_bytes(self) -> int:
        """Device bytes of its streamed weights (0 for a resident block)."""
        return 0 if self.buffers is None else self.buffers.weight_nbytes

    @property
    def parameters(self) -> int:
        return sum(p.numel() for p in self.owned)


def declare_blocks(problem: Problem, model: nn.Module) -> list[Block]:
    """The model's blocks, each parameter owned by one; bad declarations refused in one line."""
    modules = problem.blocks(model)
    first_of: dict[int, int] = {}
    for index, module in enumerate(modules):
        if id(module) in first_of:
            raise FlowrateError(
                f"blocks {first_of[id(module)]} and {index} of {type(model).__name__} are the same module: "
                "weight streaming loads each block once per pass; declare every block once"
            )
        first_of[id(module)] = index
    declared = problem.tied_parameters(model)
    owner: dict[int, int] = {}
    blocks: list[Block] = []
    for index, module in enumerate(modules):
        owned, tied = [], []
        for name, param in module.named_parameters():
            if id(param) not in owner:
                owner[id(param)] = index
                owned.append(param)
                continue
            first = owner[id(param)]
            if index - first > 1 and not any(q is param for q in declared.get(index, [])):
                raise FlowrateError(
                    f"parameter {name} of block {index} is also registered in block {first}, which is not "
                    "adjacent: weight streaming must know the weights a block uses; declare the tie "
                    "(Problem.tied_parameters) or register the parameter in one block"
                )
            tied.append(param)
        tied += [p for p in declared.get(index, []) if all(p is not q for q in owned + tied)]
        blocks.append(Block(index, module, owned, tied))
    missing = {id(p) for p in model.parameters()} - owner.keys()
    if missing:
        raise FlowrateError(
            f"{len(missing)} parameter tensors of {type(model).__name__} are in none of its declared blocks: "
            "weight streaming loads only blocks; make Problem.blocks(model) cover every parameter"
        )
    for block in blocks:
        block.needs = sorted({owner[id(p)] for p in block.tied if id(p) in owner} - {block.index})
    return blocks


def choose_resident(blocks: list[Block], setting: int | str | None, device: torch.device) -> set[int]:
    """The indices of the blocks that stay resident: ``setting`` outermost ones (first, last,
    second, second-to-last, …), or "auto"/None: the end blocks that fit (module comment)."""
    ends = _outermost(len(blocks))
    if isinstance(setting, int):
        chosen = set(ends[:setting])
    elif device.type != "cuda":
        chosen = set()  # host and device share memory: there is no copy or idle device to save
    else:
        budget = _device_bytes(device) // RESIDENT_SHARE
        chosen = set()
        for index in ends[:2]:
            cost = blocks[index].parameters * RESIDENT_BYTES_PER_PARAMETER
            if cost > budget or any(j not in chosen for j in blocks[index].needs):
                break
            chosen.add(index)
            budget -= cost
    for index in sorted(chosen):
        streamed = [j for j in blocks[index].needs if j not in chosen]
        if streamed:
            raise ConfigError(
                "resident_blocks",
                f"block {index} stays resident but uses the weights of block {streamed[0]}, which would "
                "stream: keep that block resident too",
            )
    return chosen


def _outermost(count: int) -> list[int]:
    order: list[int] = []
    low, high = 0, count - 1
    while low <= high:
        order.append(low)
        if high != low:
            order.append(high)
        low, high = low + 1, high - 1
    return order


def _device_bytes(device: torch.device) -> int:
    """The device's memory, less what --device-memory-limit withholds (a per-process fraction)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    total = int(torch.cuda.get_device_properties(index).total_memory)
    fraction = getattr(torch.cuda, "get_per_process_memory_fraction", None)  # needs an index
    return int(total * fraction(index)) if fraction is not None else total


def average_resident(blocks: list[Block], reduce: Callable[[torch.Tensor], None] | None) -> None:
    """The resident blocks' gradients averaged across ranks in place, with one collective over them
    all: before the clip coefficient reads them, so that every rank computes the same one."""
    grads = _resident_gradients(blocks)
    if reduce is not None and grads:
        flat = torch.cat([g.reshape(-1) for g in grads])
        reduce(flat)
        averaged = flat.split([g.numel() for g in grads])
        torch._foreach_copy_(grads, [a.view_as(g) for a, g in zip(averaged, grads, strict=True)])


def update_resident(blocks: list[Block], grad_scale: float) -> None:
    """The resident blocks' device optimizers, on gradients averaged (average_resident) and scaled
    by the clip coefficient."""
    grads = _resident_gradients(blocks)
    if grad_scale != 1.0 and grads:
        torch._foreach_mul_(grads, grad_scale)
    for block in blocks:
        if block.resident and block.optimizer is not None:
            block.optimizer.step()
            block.optimizer.zero_grad(set_to_none=True)


def clip_coefficient(
    blocks: list[Block], parameters: Iterable[nn.Parameter], max_norm: float, device: torch.device
) -> float:
    """torch.nn.utils.clip_grad_norm_'s coefficient over every gradient, the streamed ones landed
    on the host and the resident ones on the device: per-parameter norms in the model's parameter
    order, as resident training computes it, bit for bit."""
    grads: dict[int, torch.Tensor] = {}
    for block in blocks:
        if block.grads_out is not None:
            block.grads_out.synchronize()
        for group in block.groups if block.landed else []:
            if group.staging is not None:
                for param, offset in zip(group.params, group.offsets, strict=True):
                    grads[id(param)] = group.staging[offset : offset + param.numel()]
    grads.update({id(p): p.grad for b in blocks if b.resident for p in b.owned if p.grad is not None})
    norms = [
        torch.linalg.vector_norm(grads[id(p)], dtype=torch.float32).to(device)
        for p in parameters
        if id(p) in grads
    ]
    if not norms:
        return 1.0
    total = torch.linalg.vector_norm(torch.stack(norms))
    return float(torch.clamp(max_norm / (total + 1e-6), max=1.0))


def _resident_gradients(blocks: list[Block]) -> list[torch.Tensor]:
    return [p.grad for b in blocks if b.resident for p in b.owned if p.grad is not None]
