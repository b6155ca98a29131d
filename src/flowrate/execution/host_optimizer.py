"""The host optimizer of weight streaming: block-by-block updates of fp32 master weights in host memory.

Each block gets its own optimizer (flowrate.execution.resident.make_optimizer on host tensors:
PyTorch's fused CPU kernels) over its master parameters, so a block can be updated as soon as its
gradients have arrived, on a host thread, while the device computes the backward of the blocks
before it. AdamW and SGD are elementwise, so updating per block computes exactly what one
optimizer over all parameters computes.

One worker thread runs the updates in the order they are submitted: the device finishes
backward from the last block to the first, so updates complete in that order too, and the next
step's forward finds every block but the first already updated. Around each step, the block's
gradients land in its fp32 masters (averaged across ranks in a data-parallel run), and after it
the copies the device receives are refreshed from the updated masters.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import torch

from flowrate.execution.host_memory import HostParam


class BlockUpdater:
    """Runs each block's optimizer step on one host thread; the next step waits per block."""

    def __init__(self, optimizers: Sequence[torch.optim.Optimizer | None]) -> None:
        self.optimizers = list(optimizers)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="flowrate-host-optimizer")
        self._pending: dict[int, Future[None]] = {}
        self._lock = threading.Lock()
        self.busy_s = 0.0  # host-thread seconds spent in updates
        self.wait_s = 0.0  # seconds the caller spent waiting for an update to finish

    def submit(self, block: int, before: Callable[[], None], after: Callable[[], None]) -> None:
        """Queue block ``block``'s update: ``before`` (gradients in place), the step, ``after``."""
        optimizer = self.optimizers[block]

        def update() -> None:
            start = time.perf_counter()
            before()
            if optimizer is not None:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            after()
            with self._lock:
                self.busy_s += time.perf_counter() - start

        self._pending[block] = self._pool.submit(update)

    def wait(self, block: int) -> None:
        """Block until ``block``'s last update has finished (re-raising its error)."""
        future = self._pending.pop(block, None)
        if future is None:
            return
        start = time.perf_counter()
        future.result()
        self.wait_s += time.perf_counter() - start

    def wait_all(self) -> None:
        for block in list(self._pending):
            self.wait(block)

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def land_gradients(hosts: Sequence[HostParam], reduce: Callable[[torch.Tensor], None] | None) -> None:
    """The masters' fp32 gradients from their staging copies, reduced across ranks if asked.

    Runs on the host thread. A data-parallel run averages each block's gradients with one
    collective (``reduce``, in place) over the block's flattened gradients; every rank submits
    blocks in the same (backward) order, so the collectives match. A parameter without a gradient
    on this rank contributes zeros there, so every rank reduces tensors of the same size.
    """
    for host in hosts:
        if host.grad_copied is not None:
            host.grad_copied.synchronize()
            host.grad_copied = None
        if host.has_grad and host.grad_staging is not None:
            host.master.grad = host.grad_staging.float()
        else:
            host.master.grad = None
        host.has_grad = False
    trained = [h for h in hosts if h.grad_staging is not None]
    if reduce is None or not trained:
        return
    grads = [h.master.grad if h.master.grad is not None else torch.zeros_like(h.master) for h in trained]
    flat = torch.cat([g.reshape(-1) for g in grads])
    reduce(flat)
    offset = 0
    for host in trained:
        n = host.master.numel()
        host.master.grad = flat[offset : offset + n].view_as(host.master)
        offset += n


def refresher(hosts: Sequence[HostParam]) -> Callable[[], None]:
    """After an update: refresh the copies sent to the device that are not the masters themselves."""

    def refresh() -> None:
        for host in hosts:
            if host.send is not host.master.data:
                host.send.copy_(host.master.data)

    return refresh
