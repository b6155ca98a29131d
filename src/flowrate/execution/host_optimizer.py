"""The host optimizer of weight streaming: block-by-block updates of fp32 master weights in host memory.

Each block gets its own optimizer (flowrate.execution.resident.make_optimizer on host tensors:
PyTorch's fused CPU kernels) over its master parameters, so a block can be updated as soon as its
gradients have arrived, on a host thread, while the device computes the backward of the blocks
before it. AdamW and SGD are elementwise, so updating per block computes exactly what one
optimizer over all parameters computes.

One worker thread runs the updates in the order they are submitted: the device finishes
backward from the last block to the first, so updates complete in that order too, and the next
step's forward finds every block but the first already updated.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import torch


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
