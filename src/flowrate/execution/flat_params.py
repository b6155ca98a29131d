"""A streamed block's parameters as flat buffers: FSDP2's design, one block at a time.

Each block's parameters are split into dtype groups, and every group's parameters are views into
one flat device buffer per block whose storage is allocated (``resize_``) and filled before the
block runs and freed (``resize_(0)``) after it: a tensor autograd saved in forward (``F.linear``
keeps ``weight.t()``, a view) shares that storage, so refilling it before the backward is the only
device copy the backward needs, and nothing keeps a released block's weights alive. The host side
(fp32 masters, the copies sent, the gradients' landing places, optimizer state) are views of the
block's host arena (flowrate.execution.host_memory), laid out so that what travels each way is
one contiguous range: one copy per block and direction.

Which dtype a parameter travels in follows autocast, so streaming computes resident's function: a
weight autocast casts to the compute dtype for the op that consumes it (Linear, convolution and
attention projection weights) travels in it; everything else (embedding and positional tables,
norms, biases) travels in fp32, and autocast treats it on the device as it does resident.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from flowrate.execution.host_memory import HostArena

# modules whose weight autocast casts to the compute dtype for the op that consumes it
CAST_BY_AUTOCAST = (
    nn.Linear,
    nn.Bilinear,
    nn.Conv1d,
    nn.Conv2d,
    nn.Conv3d,
    nn.ConvTranspose1d,
    nn.ConvTranspose2d,
    nn.ConvTranspose3d,
)
_ATTENTION_WEIGHTS = ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight")


def cast_by_autocast(model: nn.Module) -> set[int]:
    """ids of the parameters autocast would cast to the compute dtype (by consuming module type)."""
    ids: set[int] = set()
    for module in model.modules():
        cast = isinstance(module, CAST_BY_AUTOCAST) or _is_library_matmul(module)
        names: tuple[str, ...] = ("weight",) if cast else ()
        if isinstance(module, nn.MultiheadAttention):
            names = _ATTENTION_WEIGHTS
        for name in names:
            param = getattr(module, name, None)
            if isinstance(param, nn.Parameter):
                ids.add(id(param))
    return ids


def _is_library_matmul(module: nn.Module) -> bool:
    """transformers' Conv1D (GPT-2's attention and MLP projections): a linear layer with its weight
    transposed, applied by addmm, which autocast runs in the compute dtype. Matched by name, so
    streaming needs no transformers import."""
    kind = type(module)
    return kind.__name__ == "Conv1D" and kind.__module__.startswith("transformers.")


Plan = tuple[int, int, torch.dtype]  # a view of a host arena: byte offset, elements, dtype


@dataclass
class FlatGroup:
    """One dtype group of a block: typed views of the block's device buffers and of its arena."""

    params: list[nn.Parameter]
    dtype: torch.dtype  # on the device and on the way there
    trains: bool
    state_buffers: int  # fp32 optimizer-state buffers kept in the arena (AdamW 2, SGD 1, else 0)
    offsets: list[int] = field(default_factory=list)
    numel: int = 0
    flat: torch.Tensor = field(init=False)  # device weights; the parameters' data are views of it
    grad: torch.Tensor | None = None  # device gradients, flat; storage only during a backward
    master: torch.Tensor = field(init=False)  # host fp32
    send: torch.Tensor = field(init=False)  # host, self.dtype (the master itself in fp32)
    staging: torch.Tensor | None = None  # host landing place of the gradient, self.dtype
    state: list[torch.Tensor] = field(default_factory=list)  # host fp32 optimizer state
    got_grad: list[bool] = field(default_factory=list)
    _plan: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for param in self.params:
            self.offsets.append(self.numel)
            self.numel += param.numel()
        self.got_grad = [False] * len(self.params)

    @property
    def nbytes(self) -> int:
        """Device bytes of the group's weights."""
        return self.numel * self.dtype.itemsize

    def plan(self, arena: HostArena, part: str) -> Plan | None:
        """Reserve the group's host views of ``part``: "send" (what travels: the master itself in
        fp32), "staging" (the gradient's landing place) or "rest" (masters, optimizer state)."""
        fp32 = self.dtype == torch.float32
        if part == "send":
            send = self._plan["send"] = arena.reserve(self.numel, self.dtype)
            if fp32:
                self._plan["master"] = send
            return send
        if part == "staging":
            staging = self._plan["staging"] = arena.reserve(self.numel, self.dtype) if self.trains else None
            return staging
        if not fp32:
            self._plan["master"] = arena.reserve(self.numel, torch.float32)
        count = self.state_buffers if self.trains else 0
        self._plan["state"] = [arena.reserve(self.numel, torch.float32) for _ in range(count)]
        return None

    def bind(self, arena: HostArena) -> None:
        """Take the host views, copy the weights in, and make the parameters views of ``flat``
        (whose storage must exist now: a view is checked against it when it is made)."""
        self.master = arena.view(self._plan["master"])
        self.send = arena.view(self._plan["send"]) if self.dtype != torch.float32 else self.master
        if self._plan["staging"] is not None:
            self.staging = arena.view(self._plan["staging"])
        self.state = [arena.view(p).zero_() for p in self._plan["state"]]
        with torch.no_grad():
            for param, offset in zip(self.params, self.offsets, strict=True):
                self.master[offset : offset + param.numel()].copy_(param.detach().reshape(-1))
            if self.send is not self.master:
                self.send.copy_(self.master)
        for param, offset in zip(self.params, self.offsets, strict=True):
            param.data = self.flat[offset : offset + param.numel()].view(param.shape)
        self._plan.clear()

    def master_views(self) -> list[torch.Tensor]:
        """Each parameter's fp32 master, shaped as the parameter."""
        return [
            self.master[o : o + p.numel()].view(p.shape)
            for p, o in zip(self.params, self.offsets, strict=True)
        ]

    # --- gradients -----------------------------------------------------------------------------

    def take_grad(self, index: int, grad: torch.Tensor) -> None:
        """Parameter ``index``'s gradient into the flat device gradient (BlockBuffers.gradients)."""
        assert self.grad is not None
        offset, param = self.offsets[index], self.params[index]
        self.grad[offset : offset + param.numel()].copy_(grad.reshape(-1))
        self.got_grad[index] = True

    def complete_grad(self) -> torch.Tensor:
        """The flat device gradient, zeros where a parameter got none this step."""
        assert self.grad is not None
        for index, got in enumerate(self.got_grad):
            if not got:
                offset = self.offsets[index]
                self.grad[offset : offset + self.params[index].numel()].zero_()
        self.got_grad = [False] * len(self.params)
        return self.grad


class BlockBuffers:
    """A streamed block's device buffers: one for its weights, one for its gradients, each the
    image of one contiguous range of the block's host arena (the copies sent, the gradients'
    landing places), so each direction is one copy; its groups hold typed views of them."""

    def __init__(self, groups: list[FlatGroup], arena: HostArena, device: torch.device) -> None:
        self.groups = groups
        self.device = device
        sends = [g.plan(arena, "send") for g in groups]
        stagings = [g.plan(arena, "staging") for g in groups]
        for group in groups:
            group.plan(arena, "rest")
        self._sends = [p for p in sends if p is not None]
        self._stagings = [p for p in stagings if p is not None]
        self.weight_nbytes = _span(self._sends)
        self.grad_nbytes = _span(self._stagings)
        self.weights = torch.empty(self.weight_nbytes, dtype=torch.uint8, device=device)
        self.grad: torch.Tensor | None = None
        self.host_send = self.host_staging = torch.empty(0, dtype=torch.uint8)

    def bind(self, arena: HostArena) -> None:
        """After the arena is allocated: the groups' views, the weights in, the device storage freed."""
        assert arena.buffer is not None
        self.host_send = _range(arena.buffer, self._sends)
        self.host_staging = _range(arena.buffer, self._stagings)
        for group, plan in zip(self.groups, self._sends, strict=True):
            group.flat = _view(self.weights, plan, self._sends[0][0])
            group.bind(arena)
        self.free()

    @property
    def present(self) -> bool:
        return self.weights.untyped_storage().nbytes() > 0

    def allocate(self) -> None:
        """Give the weights their device storage back (the caller fills it)."""
        self.weights.untyped_storage().resize_(self.weight_nbytes)

    def free(self) -> None:
        """Free the weights' storage: every view of it (parameters, saved tensors) holds 0 bytes."""
        self.weights.untyped_storage().resize_(0)

    def gradients(self) -> None:
        """The flat device gradient buffer, made at the block's first gradient of a step."""
        if self.grad is not None:
            return
        self.grad = torch.empty(self.grad_nbytes, dtype=torch.uint8, device=self.device)
        trained = [g for g in self.groups if g.trains]
        for group, plan in zip(trained, self._stagings, strict=True):
            group.grad = _view(self.grad, plan, self._stagings[0][0])

    def drop_gradients(self) -> None:
        self.grad = None
        for group in self.groups:
            group.grad = None


def _span(plans: list[Plan]) -> int:
    if not plans:
        return 0
    offset, numel, dtype = plans[-1]
    return offset + numel * dtype.itemsize - plans[0][0]


def _range(buffer: torch.Tensor, plans: list[Plan]) -> torch.Tensor:
    return buffer[plans[0][0] : plans[0][0] + _span(plans)] if plans else buffer[:0]


def _view(flat_bytes: torch.Tensor, plan: Plan, start: int) -> torch.Tensor:
    offset, numel, dtype = plan
    return flat_bytes[offset - start : offset - start + numel * dtype.itemsize].view(dtype)


def group_parameters(
    owned: list[nn.Parameter], cast: set[int], compute_dtype: torch.dtype, training: bool
) -> list[tuple[torch.dtype, bool, list[nn.Parameter]]]:
    """A block's parameters by (dtype on the device, trains): the groups its FlatGroups hold."""
    groups: dict[tuple[torch.dtype, bool], list[nn.Parameter]] = {}
    for param in owned:
        dtype = compute_dtype if id(param) in cast else torch.float32
        groups.setdefault((dtype, training and param.requires_grad), []).append(param)
    return [(dtype, trains, params) for (dtype, trains), params in groups.items()]
