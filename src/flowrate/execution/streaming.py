"""Weight streaming: weights live in host memory and visit the device one block at a time.

The fp32 master weights and the optimizer state stay in (pinned) host memory, one arena per block.
Each block's parameters are views into flat device buffers (one per dtype group) whose storage
exists only while the block runs (flowrate.execution.flat_params): before a block's forward its
weights are copied in on a host-to-device stream while the device computes the block before it,
and freed after it; in backward they are copied in again, last block first, and the tensors
autograd saved in forward (views of the same storage) see them. Each block's gradients gather in
a flat device buffer, are averaged across ranks there in a data-parallel run, and leave in one
copy on the device-to-host stream; a host thread then updates the block (one pass per group,
flowrate.execution.host_optimizer) while the device computes the blocks before it. Resident
blocks (flowrate.execution.streaming_blocks) stay on the device with a device optimizer.

How it is wired: the model's own forward runs unchanged; hooks on each declared block fetch,
release and prefetch, so any model that declares its blocks streams — the zoo's and a user's.
Weights travel in the compute dtype only where autocast would cast them, so streaming computes
resident's function.

On the CPU, host and "device" are the same memory; the device buffers are separate tensors
whose storage is really freed, so the memory bound holds and is measured there too, but the
copies are synchronous: streaming there proves the arithmetic and the footprint, not the speed.

Gradient clipping needs the global norm of all gradients before any update, so with
``clip_grad_norm`` updates start only after the whole backward (scaled by the clip coefficient).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from flowrate.config import Mode, OptimizerName, Precision
from flowrate.errors import ConfigError, FlowrateError
from flowrate.execution.base import Optimizers
from flowrate.execution.flat_params import BlockBuffers, FlatGroup, cast_by_autocast, group_parameters
from flowrate.execution.host_memory import pageable_note, room_to_pin
from flowrate.execution.host_optimizer import BlockOptimizer, BlockUpdater, updater_threads
from flowrate.execution.precision import PrecisionPolicy
from flowrate.execution.recompute import recompute_in_backward
from flowrate.execution.resident import make_optimizer
from flowrate.execution.step_times import StepTimeline
from flowrate.execution.stream_copies import Copier
from flowrate.execution.streaming_blocks import (
    Block,
    average_resident,
    choose_resident,
    clip_coefficient,
    declare_blocks,
    update_resident,
)
from flowrate.problems.base import Batch, Problem
from flowrate.results.sections import Streaming

STREAMABLE = (Precision.FP32, Precision.TF32, Precision.BF16)
_HOST = torch.device("cpu")
MakeOptimizer = Callable[[list[nn.Parameter]], torch.optim.Optimizer]


def check_streamable(precision: Precision, device: torch.device) -> None:
    if precision not in STREAMABLE:
        valid = ", ".join(p.value for p in STREAMABLE)
        raise ConfigError(
            "precision",
            f"--execution streaming keeps fp32 master weights on the host and computes in {valid}; "
            f"{precision.value} is not supported there",
        )


class StreamingExecutor:
    """Runs training or inference steps with the model's weights streamed from host memory."""

    def __init__(
        self,
        problem: Problem,
        model: nn.Module,
        policy: PrecisionPolicy,
        mode: Mode,
        optimizer: OptimizerName | MakeOptimizer,
        learning_rate: float,
        *,
        recompute: bool = False,
        clip_grad_norm: float | None = None,
        reduce_gradients: Callable[[torch.Tensor], None] | None = None,
        resident_blocks: int | str | None = None,
    ) -> None:
        """``optimizer`` names flowrate's optimizer, or makes one over a block's parameters (a
        user's optimizer class and hyper-parameters, from flowrate.session). ``reduce_gradients``
        averages a flat device gradient tensor across ranks, in place. ``resident_blocks``: how
        many outermost blocks stay on the device, or "auto"/None (streaming_blocks)."""
        check_streamable(policy.precision, policy.device)
        self.problem = problem
        self.model = model
        self.policy = policy
        self.device = policy.device
        self.mode = mode
        self.training = mode is Mode.TRAIN
        self.recompute = recompute
        self.clip_grad_norm = clip_grad_norm
        self.reduce_gradients = reduce_gradients
        self.compute_dtype = torch.bfloat16 if policy.precision is Precision.BF16 else torch.float32
        self.blocks = declare_blocks(problem, model)
        for index in choose_resident(self.blocks, resident_blocks, self.device):
            self.blocks[index].resident = True
        self._cuda = self.device.type == "cuda"
        self.times = StepTimeline()
        self.copier = Copier(self.device, self.times)
        self.warnings: list[str] = []
        self.resident_bytes = 0  # device bytes of streamed weights right now
        self.peak_resident_bytes = 0
        make: MakeOptimizer | None = None
        if self.training:
            make = (
                functools.partial(make_optimizer, optimizer, lr=learning_rate, device=_HOST)
                if isinstance(optimizer, OptimizerName)
                else optimizer
            )
        self._place(model, optimizer, make, learning_rate)
        self.updater = BlockUpdater(updater_threads() if self._cuda else None) if self.training else None
        self.model.train(self.training)
        self._install_hooks()

    # --- set-up ---------------------------------------------------------------------------------

    def _place(
        self, model: nn.Module, optimizer: Any, make: MakeOptimizer | None, learning_rate: float
    ) -> None:
        """Buffers and resident blocks to the device; streamed blocks into flat groups and arenas."""
        for owner in model.modules():
            for name, buffer in owner.named_buffers(recurse=False):
                setattr(owner, name, buffer.to(self.device))
        cast = cast_by_autocast(model)
        kernel = optimizer if isinstance(optimizer, OptimizerName) else None
        state_buffers = {OptimizerName.ADAMW: 2, OptimizerName.SGD: 1, None: 0}[kernel]
        failed: list[str] = []
        unpinned = 0  # blocks left pageable so that the later blocks' arenas still fit
        streamed = [b for b in self.blocks if not b.resident]
        for block in self.blocks:
            if block.resident:
                self._keep_resident(block, optimizer, make, learning_rate)
                continue
            for dtype, trains, params in group_parameters(
                block.owned, cast, self.compute_dtype, self.training
            ):
                block.groups.append(FlatGroup(params, dtype, trains, state_buffers))
            block.buffers = BlockBuffers(block.groups, block.arena, self.device)
            later = sum(b.parameters for b in streamed[streamed.index(block) + 1 :])
            pin = self._pins_host_memory() and room_to_pin(block.arena.requested, block.parameters, later)
            unpinned += self._pins_host_memory() and not pin
            warning = block.arena.allocate(pin=pin)
            failed += [warning] if warning else []
            block.buffers.bind(block.arena)
            if make is not None and any(g.trains for g in block.groups):
                block.optimizer = BlockOptimizer(block.groups, make, kernel)
        if failed:  # one line for the run, not one per block
            self.warnings.append(f"{failed[0]} ({len(failed)} of {len(self.blocks)} blocks)")
        if unpinned:
            self.warnings.append(pageable_note(unpinned, len(streamed)))

    def _keep_resident(self, block: Block, optimizer: Any, make: MakeOptimizer | None, lr: float) -> None:
        for param in block.owned:
            param.data = param.data.to(self.device)
        trained = [p for p in block.owned if p.requires_grad]
        if make is None or not trained:
            return
        if isinstance(optimizer, OptimizerName):
            block.optimizer = make_optimizer(optimizer, trained, lr, self.device)
        else:
            block.optimizer = make(trained)

    def _pins_host_memory(self) -> bool:
        """Page-locked host memory makes copies to a CUDA device asynchronous (and faster)."""
        return self._cuda

    @property
    def pinned(self) -> bool:
        """Whether every streamed block's host arena is pinned."""
        return all(b.arena.pinned for b in self.blocks if not b.resident)

    def _install_hooks(self) -> None:
        for block in self.blocks:
            block.module.register_forward_pre_hook(functools.partial(self._before_forward, block))
            block.module.register_forward_hook(functools.partial(self._after_forward, block))
            if self.recompute and self.training:
                recompute_in_backward(block.module)
            if block.resident or not self.training:
                continue
            for group in block.groups:
                for index, param in enumerate(group.params):
                    if group.trains:
                        param.register_post_accumulate_grad_hook(
                            functools.partial(self._gradient_ready, block, group, index)
                        )

    # --- moving weights ---------------------------------------------------------------------------

    def _fetch(self, index: int) -> None:
        """Start copying block ``index``'s weights in (no-op if there, resident or no such block)."""
        if not 0 <= index < len(self.blocks):
            return
        block = self.blocks[index]
        if block.resident or block.present:
            return
        if self.updater is not None:  # the weights must be this step's, updated
            start = time.perf_counter()
            self.updater.wait(index)
            self.times.current.optimizer_wait_s += time.perf_counter() - start
        assert block.buffers is not None
        block.copied = self.copier.copy_in(block.buffers, block.arena.pinned)
        block.present = True
        self.resident_bytes += block.weight_bytes
        self.peak_resident_bytes = max(self.peak_resident_bytes, self.resident_bytes)

    def _use(self, index: int) -> None:
        """Block ``index``'s weights (and its tied blocks') on the device, for the compute stream."""
        block = self.blocks[index]
        for owner in block.needs:
            self._use(owner)
        self._fetch(index)
        self._await_copy(block)

    def _await_copy(self, block: Block) -> None:
        if block.copied is None:
            return
        stream = torch.cuda.current_stream(self.device)
        before, after = self.times.events("copy_wait")
        before.record(stream)
        stream.wait_event(block.copied)
        after.record(stream)
        block.copied = None

    def _release(self, index: int, keep: tuple[int, ...] = ()) -> None:
        """Free block ``index``'s device weights, and those of the blocks it ties to unless in ``keep``."""
        if not 0 <= index < len(self.blocks):
            return
        block = self.blocks[index]
        for owner in block.needs:
            if owner not in keep:
                self._release(owner)
        if block.resident or not block.present:
            return
        self._await_copy(block)  # the memory is reused in the compute stream's order: after the copy
        assert block.buffers is not None
        block.buffers.free()
        block.present = False
        self.resident_bytes -= block.weight_bytes

    # --- hooks ----------------------------------------------------------------------------------

    def _before_forward(self, block: Block, module: nn.Module, args: Any) -> None:
        if self.training and torch.is_grad_enabled():
            if block.ran:
                raise FlowrateError(
                    f"block {block.index} ({type(module).__name__}) ran twice in one forward: weight "
                    "streaming loads each block once per pass; make a module reused in forward one block"
                )
            block.ran = True
        self._use(block.index)
        self._fetch(block.index + 1)

    def _after_forward(self, block: Block, module: nn.Module, args: Any, output: Any) -> None:
        if not self.training or not torch.is_grad_enabled():
            self._release(block.index)
            return
        for tensor in _tensors(output):
            if tensor.requires_grad:
                tensor.register_hook(functools.partial(self._before_backward, block))
        if block.index == len(self.blocks) - 1:  # backward starts here: keep it, fetch the one before
            self._fetch(block.index - 1)
        else:
            self._release(block.index, keep=(block.index + 1,))

    def _before_backward(self, block: Block, grad: torch.Tensor) -> None:
        # the block after this one has finished its backward: its weights can go
        self._release(block.index + 1, keep=(block.index, block.index - 1, *block.needs))
        self._use(block.index)
        self._fetch(block.index - 1)

    def _gradient_ready(self, block: Block, group: FlatGroup, index: int, param: torch.Tensor) -> None:
        grad = param.grad
        param.grad = None
        if grad is None:
            return
        assert block.buffers is not None
        block.buffers.gradients()
        group.take_grad(index, grad)
        block.waiting -= 1
        if block.waiting == 0:
            self._gradients_out(block)

    def _gradients_out(self, block: Block) -> None:
        """The block's gradients are complete: average them on the device, copy them out, update."""
        groups = [g for g in block.groups if g.trains]
        block.waiting = 0
        if self.reduce_gradients is None and not any(any(g.got_grad) for g in groups):
            return  # no gradient at all this step: resident's optimizer would skip it too
        block.landed = True
        assert block.buffers is not None
        block.buffers.gradients()  # made here if no parameter got a gradient
        for group in groups:
            flat = group.complete_grad()
            if self.reduce_gradients is not None:
                self.reduce_gradients(flat)
        block.grads_out = self.copier.copy_out(block.buffers, block.arena.pinned)
        if self.clip_grad_norm is None:
            self._submit_update(block)

    # --- the updates ------------------------------------------------------------------------------

    def _submit_update(self, block: Block, grad_scale: float = 1.0) -> None:
        assert self.updater is not None and block.optimizer is not None
        landed, block.grads_out, block.landed = block.grads_out, None, False
        optimizer: BlockOptimizer = block.optimizer

        def update() -> None:
            if landed is not None:
                landed.synchronize()
            optimizer.step(grad_scale)

        self.updater.submit(block.index, update)

    # --- steps --------------------------------------------------------------------------------

    def step(self, batch: Batch) -> torch.Tensor:
        """Queue one step; return its loss (a detached device tensor)."""
        self.begin_step()
        if not self.training:
            with torch.inference_mode(), self.policy.autocast():
                loss = self.problem.loss(self.model, batch)
            self.times.end()
            return loss
        with self.policy.autocast():
            loss = self.problem.loss(self.model, batch)
        return self.update(loss)

    def begin_step(self) -> None:
        """Before a step's forward: count the gradients each block waits for."""
        self.times.begin()
        for block in self.blocks:
            block.ran = False
            block.waiting = sum(len(g.params) for g in block.groups if g.trains)

    def update(self, loss: torch.Tensor) -> torch.Tensor:
        """Backward from ``loss`` (gradients stream out, the host updates each block), then release
        every block: the second half of a training step, also for a loss computed by the user's own
        loop (flowrate.session), which calls begin_step() before its forward."""
        if not self.training:
            self.times.end()
            return loss.detach()
        loss.backward()
        for block in self.blocks:
            self._release(block.index)
            if block.waiting > 0:  # some parameters got no gradient: zeros (see FlatGroup.complete_grad)
                self._gradients_out(block)
        average_resident(self.blocks, self.reduce_gradients)  # before the clip norm reads them
        scale = 1.0
        if self.clip_grad_norm is not None:
            scale = clip_coefficient(self.blocks, self.model.parameters(), self.clip_grad_norm, self.device)
        if self.clip_grad_norm is not None:
            for block in self.blocks:
                if block.landed:
                    self._submit_update(block, scale)
        update_resident(self.blocks, scale)
        for block in self.blocks:
            block.ran = False
        self.times.end()
        return loss.detach()

    def finish(self) -> None:
        """Wait for the last updates (the weights are then final) and stop the host thread."""
        if self.updater is not None:
            self.updater.wait_all()
            self.updater.close()

    @contextmanager
    def master_weights(self) -> Iterator[nn.Module]:
        """The model with its fp32 master weights in place (checkpoints, tests), then back."""
        if self.updater is not None:
            self.updater.wait_all()
        saved: list[tuple[nn.Parameter, torch.Tensor]] = []
        for block in self.blocks:
            for group in block.groups:
                for param, master in zip(group.params, group.master_views(), strict=True):
                    saved.append((param, param.data))
                    param.data = master
        try:
            yield self.model
        finally:
            for param, data in saved:
                param.data = data

    @contextmanager
    def checkpoint_state(self) -> Iterator[tuple[nn.Module, Optimizers]]:
        """The model with its fp32 master weights, and the per-block optimizers (host and device)."""
        with self.master_weights() as model:
            optimizers = [
                b.optimizer if b.resident else b.optimizer.optimizer
                for b in self.blocks
                if b.optimizer is not None
            ]
            yield model, optimizers

    # --- the record -----------------------------------------------------------------------------

    def report(self, timed_steps: int | None = None) -> Streaming:
        """Per-step times (medians over the timed steps) and memory, for Result.streaming."""
        if self._cuda:
            torch.cuda.synchronize(self.device)  # the copies' CUDA events can be read now
        times = self.times.medians(timed_steps)
        copy_in = times["copy_in_s"]
        exposed = times["copy_wait_s"] if self._cuda else copy_in
        streamed = [b for b in self.blocks if not b.resident]
        return Streaming(
            blocks=len(self.blocks),
            resident_blocks=[b.index for b in self.blocks if b.resident],
            recompute=self.recompute,
            clip_grad_norm=self.clip_grad_norm,
            compute_dtype=str(self.compute_dtype).removeprefix("torch."),
            copy_in_s_per_step=copy_in,
            copy_out_s_per_step=times["copy_out_s"],
            copy_exposed_s_per_step=exposed,
            copy_hidden_fraction=None if copy_in <= 0 else max(0.0, 1.0 - exposed / copy_in),
            optimizer_wait_s_per_step=times["optimizer_wait_s"],
            optimizer_s_total=None if self.updater is None else self.updater.busy_s,
            steps=len(self.times.steps),
            device_weight_bytes_peak=self.peak_resident_bytes,
            largest_block_bytes=max((b.weight_bytes for b in streamed), default=0),
            host_bytes=sum(b.arena.nbytes for b in streamed),
            host_pinned=self._cuda and self.pinned,
            note=None
            if self._cuda
            else "on the CPU host and device share memory: copies are clones, none is hidden",
        )


def _tensors(output: Any) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, tuple | list):
        return [t for item in output for t in _tensors(item)]
    if isinstance(output, dict):
        return [t for item in output.values() for t in _tensors(item)]
    return []
