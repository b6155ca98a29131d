"""The host optimizer of weight streaming: block-by-block updates of fp32 master weights in host memory.

Each block gets its own optimizer over its groups' flat fp32 masters (one parameter per dtype
group), so a block can be updated as soon as its gradients have landed, on a host thread, while
the device computes the backward of the blocks before it. AdamW and SGD are elementwise, so
updating per block computes exactly what one optimizer over all parameters computes.

flowrate's own optimizers (flowrate.execution.resident.make_optimizer's AdamW and SGD) run as one
call of flowrate.execution.host_adamw's kernel per group: the gradient in the compute dtype is
widened, the master updated and the copy to send narrowed in one pass over the block's memory;
the torch optimizer only holds the state (its state_dict is what a checkpoint saves). A user's
optimizer (a session's) steps as torch.optim does, on a persistent fp32 gradient buffer.

One worker thread runs the updates in the order they are submitted (the backward's order); on a
CUDA run with one intra-op thread fewer than the process had, so the thread that launches the
device's kernels is not starved. Every submitted update is kept until it is waited for: an error
is never lost.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import torch
from torch import nn

from flowrate.config import OptimizerName
from flowrate.execution.flat_params import FlatGroup
from flowrate.execution.host_adamw import adamw_step_, sgd_step_


def updater_threads(process_threads: int | None = None) -> int:
    """Intra-op threads for the host optimizer: all but one of the process's (at least one)."""
    return max(1, (process_threads or torch.get_num_threads()) - 1)


class BlockUpdater:
    """Runs each block's update on one host thread; the next step waits per block.

    ``threads``: intra-op threads while it runs (None: leave them). PyTorch's count is process-wide,
    so this sets it for the process until ``close``, which puts the caller's back: on a CUDA run
    the main thread only launches kernels and keeps a core to itself that way.
    """

    def __init__(self, threads: int | None = None) -> None:
        self._restore = torch.get_num_threads() if threads is not None else None
        self._pool = ThreadPoolExecutor(
            max_workers=1,
            thread_name_prefix="flowrate-host-optimizer",
            initializer=None if threads is None else functools.partial(torch.set_num_threads, threads),
        )
        self._pending: dict[int, list[Future[None]]] = {}
        self._lock = threading.Lock()
        self.busy_s = 0.0  # host-thread seconds spent in updates
        self.wait_s = 0.0  # seconds the caller spent waiting for an update to finish

    def submit(self, block: int, update: Callable[[], None]) -> None:
        """Queue ``update`` of block ``block`` after every update queued before it."""

        def run() -> None:
            start = time.perf_counter()
            try:
                update()
            finally:
                with self._lock:
                    self.busy_s += time.perf_counter() - start

        self._pending.setdefault(block, []).append(self._pool.submit(run))

    def wait(self, block: int) -> None:
        """Block until every update of ``block`` queued so far has finished (re-raising an error)."""
        futures = self._pending.pop(block, [])
        if not futures:
            return
        start = time.perf_counter()
        try:
            _results(futures)
        finally:
            self.wait_s += time.perf_counter() - start

    def wait_all(self) -> None:
        """Wait for every queued update; the first error (in submission order) is raised after all ended."""
        futures = [f for block in list(self._pending) for f in self._pending.pop(block)]
        _results(futures)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if self._restore is not None:
            torch.set_num_threads(self._restore)


def _results(futures: Sequence[Future[None]]) -> None:
    error: BaseException | None = None
    for future in futures:
        try:
            future.result()
        except BaseException as caught:  # every future is waited for; the first error wins
            error = error or caught
    if error is not None:
        raise error


class BlockOptimizer:
    """One block's host update over its training groups' flat masters.

    ``kernel`` names flowrate's optimizer when ``make`` is make_optimizer for it (one pass per
    group through host_adamw); None steps ``make``'s optimizer (a user's) as torch.optim does.
    """

    def __init__(
        self,
        groups: Sequence[FlatGroup],
        make: Callable[[list[nn.Parameter]], torch.optim.Optimizer],
        kernel: OptimizerName | None,
    ) -> None:
        self.groups = [g for g in groups if g.trains]
        self.masters = [nn.Parameter(g.master, requires_grad=False) for g in self.groups]
        self.optimizer = make(self.masters)
        self.kernel = kernel
        self._fp32_grads: list[torch.Tensor | None] = [None] * len(self.groups)
        if kernel is None:
            return
        for group, master in zip(self.groups, self.masters, strict=True):  # the state a checkpoint saves
            if kernel is OptimizerName.ADAMW:
                exp_avg, exp_avg_sq = group.state
                step = torch.zeros((), dtype=torch.float32)
                self.optimizer.state[master] = {"step": step, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}
            else:
                self.optimizer.state[master] = {"momentum_buffer": group.state[0]}

    def step(self, grad_scale: float = 1.0) -> None:
        """Update every group from its landed gradient (times ``grad_scale``) and refresh its copy to send."""
        settings = self.optimizer.param_groups[0]
        for index, (group, master) in enumerate(zip(self.groups, self.masters, strict=True)):
            assert group.staging is not None
            send = None if group.send is group.master else group.send
            state = self.optimizer.state[master]
            if self.kernel is OptimizerName.ADAMW:
                state["step"] += 1
                beta1, beta2 = settings["betas"]
                adamw_step_(
                    group.master,
                    group.staging,
                    state["exp_avg"],
                    state["exp_avg_sq"],
                    send,
                    step=int(state["step"].item()),
                    lr=float(settings["lr"]),
                    beta1=float(beta1),
                    beta2=float(beta2),
                    eps=float(settings["eps"]),
                    weight_decay=float(settings["weight_decay"]),
                    grad_scale=grad_scale,
                )
            elif self.kernel is OptimizerName.SGD:
                sgd_step_(
                    group.master,
                    group.staging,
                    state["momentum_buffer"],
                    send,
                    lr=float(settings["lr"]),
                    momentum=float(settings["momentum"]),
                    weight_decay=float(settings["weight_decay"]),
                    grad_scale=grad_scale,
                )
            else:
                self._torch_step(index, group, master, grad_scale)

    def _torch_step(self, index: int, group: FlatGroup, master: nn.Parameter, grad_scale: float) -> None:
        assert group.staging is not None
        grad = self._fp32_grads[index]
        if grad is None:
            grad = group.staging if group.staging.dtype == torch.float32 else torch.empty_like(group.master)
            self._fp32_grads[index] = grad
        if grad is not group.staging:
            grad.copy_(group.staging)
        if grad_scale != 1.0:
            grad.mul_(grad_scale)
        master.grad = grad
        if index == len(self.groups) - 1:  # every group's gradient is in place: one step for all
            self.optimizer.step()
            for one, other in zip(self.groups, self.masters, strict=True):
                other.grad = None
                if one.send is not one.master:
                    one.send.copy_(one.master)
