"""Weight streaming: weights live in host memory and visit the device one block at a time.

The fp32 master weights and the optimizer state stay in (pinned) host memory. Before a block
runs, its weights are copied to the device in the compute precision on a copy stream, while the
device still computes the block before it (double buffering: the device holds the running block
and the next one). Activations stay on the device, or are recomputed per block (``recompute``).
In backward the weights stream in again, last block first; each parameter's gradient is copied
to the host as soon as autograd has accumulated it, and once all of a block's gradients are
there a host thread updates that block while the device computes the blocks before it.

How it is wired: the model's own forward runs unchanged. Hooks on each declared block swap
its parameters' ``.data`` between a device copy and an empty placeholder (the technique of
ZeRO-3 and FSDP), so any model that declares its blocks streams — the zoo's and a user's.
Autograd saves parameters by reference, so a block's weights only need to be on the device
while its forward runs and again when its backward runs, which is when the hooks put them back.

On the CPU, host and device are the same memory; the code path is the same (copies are clones,
there is no copy stream), so streaming there proves the arithmetic, not the speed.

Gradient clipping needs the global norm of all gradients before any update, so with
``clip_grad_norm`` updates start only after the whole backward: the host optimizer's time is no
longer hidden behind the backward (the copies still are).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from flowrate.config import Mode, OptimizerName, Precision
from flowrate.errors import ConfigError, FlowrateError
from flowrate.execution.base import Optimizers
from flowrate.execution.host_memory import HostMemory
from flowrate.execution.host_optimizer import BlockUpdater, land_gradients, refresher
from flowrate.execution.precision import PrecisionPolicy
from flowrate.execution.recompute import recompute_in_backward
from flowrate.execution.resident import make_optimizer
from flowrate.execution.step_times import StepTimeline, cuda_event
from flowrate.problems.base import Batch, Problem

STREAMABLE = (Precision.FP32, Precision.TF32, Precision.BF16)
_HOST = torch.device("cpu")


def check_streamable(precision: Precision, device: torch.device) -> None:
    if precision not in STREAMABLE:
        valid = ", ".join(p.value for p in STREAMABLE)
        raise ConfigError(
            "precision",
            f"--execution streaming keeps fp32 master weights on the host and computes in {valid}; "
            f"{precision.value} is not supported there",
        )


@dataclass
class _Block:
    index: int
    module: nn.Module
    params: list[nn.Parameter]  # what the block's forward uses: its own, then tied ones
    owned: list[nn.Parameter]  # the parameters this block updates (registered in it)
    send_bytes: int  # bytes one visit copies to the device
    buffers: dict[int, torch.Tensor] = field(default_factory=dict)  # id(param) -> device copy
    copied: Any = None  # CUDA event: the device copy is complete
    waiting: int = 0  # owned parameters whose gradient has not arrived this step
    owners: list[int] = field(default_factory=list)  # blocks whose updates its weights come from


class StreamingExecutor:
    """Runs training or inference steps with the model's weights streamed from host memory."""

    def __init__(
        self,
        problem: Problem,
        model: nn.Module,
        policy: PrecisionPolicy,
        mode: Mode,
        optimizer: OptimizerName | Callable[[list[nn.Parameter]], torch.optim.Optimizer],
        learning_rate: float,
        *,
        recompute: bool = False,
        clip_grad_norm: float | None = None,
        reduce_gradients: Callable[[torch.Tensor], None] | None = None,
    ) -> None:
        """``optimizer`` names flowrate's optimizer, or makes one over a block's host master
        parameters (a user's optimizer class and hyper-parameters, from flowrate.session)."""
        check_streamable(policy.precision, policy.device)
        self.problem = problem
        # data-parallel streaming: averages a flat fp32 gradient tensor across ranks, in place
        self.reduce_gradients = reduce_gradients
        self.policy = policy
        self.device = policy.device
        self.mode = mode
        self.recompute = recompute
        self.clip_grad_norm = clip_grad_norm
        self.compute_dtype = torch.bfloat16 if policy.precision is Precision.BF16 else torch.float32
        self.model = model
        self.blocks = self._declare_blocks(problem, model)
        self._cuda = self.device.type == "cuda"
        self._copy_stream = torch.cuda.Stream(self.device) if self._cuda else None
        self._placeholder = torch.empty(0, dtype=self.compute_dtype, device=self.device)
        self.host = HostMemory(pin=self._pins_host_memory())
        self.warnings = self.host.warnings  # a failed pinned allocation says so here
        self._place(model)
        self.resident_bytes = 0  # device bytes of streamed weights right now
        self.peak_resident_bytes = 0
        self.times = StepTimeline()
        self.updater: BlockUpdater | None = None
        if mode is Mode.TRAIN:
            self.model.train()
            masters = [[self.host[p].master for p in b.owned] for b in self.blocks]
            make: Callable[[list[nn.Parameter]], torch.optim.Optimizer] = (
                functools.partial(make_optimizer, optimizer, lr=learning_rate, device=_HOST)
                if isinstance(optimizer, OptimizerName)
                else optimizer
            )
            self.updater = BlockUpdater([make(m) if m else None for m in masters])
        else:
            self.model.eval()
        self._install_hooks()

    # --- set-up ---------------------------------------------------------------------------------

    @staticmethod
    def _declare_blocks(problem: Problem, model: nn.Module) -> list[_Block]:
        modules = problem.blocks(model)
        tied = problem.tied_parameters(model)
        blocks: list[_Block] = []
        seen: set[int] = set()
        for index, module in enumerate(modules):
            owned = [p for p in module.parameters() if id(p) not in seen]
            seen.update(id(p) for p in owned)
            extra = [p for p in tied.get(index, []) if all(p is not q for q in owned)]
            blocks.append(_Block(index, module, owned + extra, owned, 0))
        everything = {id(p) for p in model.parameters()}
        if everything - seen:
            missing = len(everything - seen)
            raise FlowrateError(
                f"{missing} parameter tensors of {type(model).__name__} are in none of its declared blocks: "
                "weight streaming loads only blocks; make Problem.blocks(model) cover every parameter"
            )
        owner_of = {id(p): block.index for block in blocks for p in block.owned}
        for block in blocks:  # once here, not at every fetch inside the timed loop
            block.owners = sorted({owner_of[id(p)] for p in block.params} | {block.index})
        return blocks

    def _place(self, model: nn.Module) -> None:
        """Masters to (pinned) host memory, buffers to the device, parameters to placeholders."""
        for buffer_owner in model.modules():
            for name, buffer in buffer_owner.named_buffers(recurse=False):
                setattr(buffer_owner, name, buffer.to(self.device))
        for block in self.blocks:
            for param in block.owned:
                trains = self.mode is Mode.TRAIN and param.requires_grad
                self.host.keep(param, self._send_dtype(param), trains)
                param.data = self._placeholder
            block.send_bytes = sum(self.host[p].send.nbytes for p in block.params)

    def _pins_host_memory(self) -> bool:
        """Page-locked host memory makes copies to a CUDA device asynchronous (and faster)."""
        return self._cuda

    @property
    def pinned(self) -> bool:
        """Whether the host side is pinned (False also after a failed pinned allocation)."""
        return self.host.pinned

    def _send_dtype(self, param: nn.Parameter) -> torch.dtype:
        """Matrices (linear, conv, embedding weights) travel in the compute precision; vectors
        (biases, norm scales) stay fp32, as autocast keeps them: they are a rounding error in
        bytes, and norms with running statistics need them in fp32."""
        return self.compute_dtype if param.dim() >= 2 else torch.float32

    def _install_hooks(self) -> None:
        for block in self.blocks:
            block.module.register_forward_pre_hook(self._before_forward(block))
            block.module.register_forward_hook(self._after_forward(block))
            if self.recompute and self.mode is Mode.TRAIN:
                recompute_in_backward(block.module)
        if self.mode is Mode.TRAIN:
            for block in self.blocks:
                for param in block.owned:
                    if param.requires_grad:
                        param.register_post_accumulate_grad_hook(self._gradient_ready(block))

    # --- moving weights ---------------------------------------------------------------------------

    def _fetch(self, index: int) -> None:
        """Start copying block ``index``'s weights to the device (no-op if there, or no such block)."""
        if not 0 <= index < len(self.blocks):
            return
        block = self.blocks[index]
        if block.buffers:
            return
        if self.updater is not None:  # the weights must be this step's, updated
            start = time.perf_counter()
            for owner in block.owners:
                self.updater.wait(owner)
            self.times.current.optimizer_wait_s += time.perf_counter() - start
        if self._copy_stream is None:
            start = time.perf_counter()
            block.buffers = {id(p): self.host[p].send.clone() for p in block.params}
            self.times.current.copy_in_s += time.perf_counter() - start
        else:
            begin, end = self.times.events("copy_in")
            with torch.cuda.stream(self._copy_stream):
                begin.record()
                block.buffers = {
                    id(p): self.host[p].send.to(self.device, non_blocking=self.pinned) for p in block.params
                }
                end.record()
            block.copied = end
        self.resident_bytes += block.send_bytes
        self.peak_resident_bytes = max(self.peak_resident_bytes, self.resident_bytes)

    def _use(self, index: int) -> None:
        """Make block ``index``'s weights the parameters' data, on the compute stream."""
        block = self.blocks[index]
        self._fetch(index)
        if block.copied is not None:
            stream = torch.cuda.current_stream(self.device)
            before, after = self.times.events("copy_wait")
            before.record(stream)
            stream.wait_event(block.copied)
            after.record(stream)
            for buffer in block.buffers.values():
                buffer.record_stream(stream)  # not reused until the compute stream is done with it
            block.copied = None
        for param in block.params:
            param.data = block.buffers[id(param)]

    def _release(self, index: int) -> None:
        if not 0 <= index < len(self.blocks):
            return
        block = self.blocks[index]
        if not block.buffers:
            return
        for param in block.params:
            if param.data is block.buffers.get(id(param)):
                param.data = self._placeholder
        block.buffers = {}
        block.copied = None
        self.resident_bytes -= block.send_bytes

    # --- hooks ----------------------------------------------------------------------------------

    def _before_forward(self, block: _Block) -> Any:
        def hook(module: nn.Module, args: Any) -> None:
            self._use(block.index)
            self._fetch(block.index + 1)

        return hook

    def _after_forward(self, block: _Block) -> Any:
        last = block.index == len(self.blocks) - 1

        def hook(module: nn.Module, args: Any, output: Any) -> None:
            if self.mode is Mode.INFER or not torch.is_grad_enabled():
                self._release(block.index)
                return
            for tensor in _tensors(output):
                if tensor.requires_grad:
                    tensor.register_hook(self._before_backward(block))
            if last:  # backward starts here: keep it, and fetch the block before it
                self._fetch(block.index - 1)
            else:
                self._release(block.index)

        return hook

    def _before_backward(self, block: _Block) -> Any:
        def hook(grad: torch.Tensor) -> None:
            # the block after this one has finished its backward: its weights can go
            self._release(block.index + 1)
            self._use(block.index)
            self._fetch(block.index - 1)

        return hook

    def _gradient_ready(self, block: _Block) -> Any:
        def hook(param: torch.Tensor) -> None:
            host = self.host[param]
            grad = param.grad
            param.grad = None
            if grad is None:
                return
            assert host.grad_staging is not None
            if self._copy_stream is None:
                start = time.perf_counter()
                host.grad_staging.copy_(grad)
                self.times.current.copy_out_s += time.perf_counter() - start
            else:
                ready = cuda_event()
                begin, end = self.times.events("copy_out")
                ready.record(torch.cuda.current_stream(self.device))
                with torch.cuda.stream(self._copy_stream):
                    self._copy_stream.wait_event(ready)
                    begin.record()
                    host.grad_staging.copy_(grad, non_blocking=self.pinned)
                    end.record()
                grad.record_stream(self._copy_stream)
                host.grad_copied = end
            host.has_grad = True
            block.waiting -= 1
            if block.waiting == 0 and self.clip_grad_norm is None:
                self._submit_update(block)

        return hook

    # --- the host update --------------------------------------------------------------------------

    def _submit_update(self, block: _Block) -> None:
        assert self.updater is not None
        hosts = [self.host[p] for p in block.owned]
        land = functools.partial(land_gradients, hosts, self.reduce_gradients)
        self.updater.submit(block.index, land, refresher(hosts))

    def _clip_and_update_all(self) -> None:
        """Clipping: the global norm over every gradient, then every block's update."""
        assert self.updater is not None and self.clip_grad_norm is not None
        for block in self.blocks:
            land_gradients([self.host[p] for p in block.owned], self.reduce_gradients)
        masters = [h.master for h in self.host if h.master.grad is not None]
        torch.nn.utils.clip_grad_norm_(masters, self.clip_grad_norm)
        for block in self.blocks:
            self.updater.submit(block.index, lambda: None, refresher([self.host[p] for p in block.owned]))

    # --- steps --------------------------------------------------------------------------------

    def step(self, batch: Batch) -> torch.Tensor:
        """Queue one step; return its loss (a detached device tensor)."""
        self.times.begin()
        if self.mode is Mode.INFER:
            with torch.inference_mode(), self.policy.autocast():
                loss = self.problem.loss(self.model, batch)
            self.times.end()
            return loss
        self.begin_step()
        with self.policy.autocast():
            loss = self.problem.loss(self.model, batch)
        return self.update(loss)

    def begin_step(self) -> None:
        """Before a training step's forward: count the gradients each block waits for."""
        self.times.begin()
        for block in self.blocks:
            block.waiting = sum(1 for p in block.owned if p.requires_grad)

    def update(self, loss: torch.Tensor) -> torch.Tensor:
        """Backward from ``loss`` (its gradients stream out, the host updates each block), then
        release every block: the second half of a training step, also for a loss computed by
        the user's own loop (flowrate.session), which calls begin_step() before its forward.
        Inference steps only record their copy times."""
        if self.mode is Mode.INFER:
            self.times.end()
            return loss.detach()
        loss.backward()
        for index in range(len(self.blocks)):
            self._release(index)
        if self.clip_grad_norm is not None:
            self._clip_and_update_all()
        else:
            for block in self.blocks:  # blocks some of whose parameters got no gradient
                if block.waiting > 0:
                    self._submit_update(block)
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
        saved = {}
        for block in self.blocks:
            for param in block.owned:
                saved[id(param)] = param.data
                param.data = self.host[param].master.data
        try:
            yield self.model
        finally:
            for block in self.blocks:
                for param in block.owned:
                    param.data = saved[id(param)]

    @contextmanager
    def checkpoint_state(self) -> Iterator[tuple[nn.Module, Optimizers]]:
        """The model with its fp32 master weights, and the per-block host optimizers."""
        with self.master_weights() as model:
            optimizers = self.updater.optimizers if self.updater else []
            yield model, [o for o in optimizers if o is not None]

    # --- the record -----------------------------------------------------------------------------

    def report(self, timed_steps: int | None = None) -> dict[str, Any]:
        """Per-step times (medians over the timed steps) and memory, for Result.streaming."""
        if self._copy_stream is not None:
            torch.cuda.synchronize(self.device)  # the copies' CUDA events can be read now
        times = self.times.medians(timed_steps)
        copy_in = times["copy_in_s"]
        exposed = times["copy_wait_s"] if self._cuda else copy_in
        return {
            "blocks": len(self.blocks),
            "recompute": self.recompute,
            "clip_grad_norm": self.clip_grad_norm,
            "compute_dtype": str(self.compute_dtype).removeprefix("torch."),
            "copy_in_s_per_step": copy_in,
            "copy_out_s_per_step": times["copy_out_s"],
            "copy_exposed_s_per_step": exposed,
            "copy_hidden_fraction": None if copy_in <= 0 else max(0.0, 1.0 - exposed / copy_in),
            "optimizer_wait_s_per_step": times["optimizer_wait_s"],
            "optimizer_s_total": None if self.updater is None else self.updater.busy_s,
            "steps": len(self.times.steps),
            "device_weight_bytes_peak": self.peak_resident_bytes,
            "largest_block_bytes": max(b.send_bytes for b in self.blocks),
            "host_bytes": self.host.nbytes(),
            "host_pinned": self.pinned,
            "note": None
            if self._cuda
            else "on the CPU host and device share memory: copies are clones, none is hidden",
        }


def _tensors(output: Any) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, tuple | list):
        return [t for item in output for t in _tensors(item)]
    if isinstance(output, dict):
        return [t for item in output.values() for t in _tensors(item)]
    return []
