"""The host optimizer's kernel: one pass over a block's flat buffers per step.

Weight streaming keeps fp32 master weights and optimizer state in host memory; each step a block's
gradients arrive in the compute dtype and a copy of its updated weights leaves in it. Done as three
whole-buffer passes (widen the gradient, update, narrow the weights) that is 40 bytes of memory
traffic per parameter, a fresh fp32 gradient written and read back among them; here every buffer
is walked once, in chunks of ``CHUNK`` elements that stay in cache between the three operations:

    widen:   scratch = float(grad[i:j]) * grad_scale        (scratch: in cache)
    update:  PyTorch's fused AdamW/SGD kernel on master, exp_avg, exp_avg_sq [i:j] and scratch
    narrow:  send_out[i:j] = master[i:j]                     (master[i:j] read back from cache)

so memory moves 28 bytes per AdamW parameter with a bf16 gradient: master, exp_avg and exp_avg_sq
read and written (24), the gradient read (2), the outgoing copy written (2); 20 for SGD with
momentum. The update is PyTorch's own fused CPU kernel (what flowrate.execution.resident.
make_optimizer uses on the host), so streaming and resident training compute the same update bit
for bit; only the order of the work changes.

Threads: the work of a call is split into contiguous ranges, one per thread of a small pool
(``update_threads``; by default torch.get_num_threads() when the pool is first used), each thread
running PyTorch's kernels with ONE intra-op thread; the caller waits. So a call occupies exactly
``update_threads()`` cores and joins once, where intra-op parallelism would fork and join three
times per chunk: on this project's loaded 2-core machine that measured 3-9x slower (a thread
descheduled by another process stalls every join). A streaming run on a GPU host leaves a core to
the thread that launches kernels by calling ``set_update_threads(cores - 1)``. A buffer of one
chunk or less runs on the calling thread.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import Tensor

# Elements per chunk: what must stay in cache between a chunk's operations, its fp32 scratch and
# master slice, is 2 MiB per thread (an L2 or a share of an L3). Measured on 2 EPYC cores: 64 Ki
# ran ~25% slower (Python and dispatch, ~20 µs per chunk, against less work), 1 Mi no faster.
CHUNK = 1 << 18

_local = threading.local()  # each working thread's fp32 scratch and step counter


def adamw_step_(
    master: Tensor,
    grad_in: Tensor,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    send_out: Tensor | None,
    *,
    step: int,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    grad_scale: float = 1.0,
) -> None:
    """torch.optim.AdamW's update of ``master`` by ``grad_in.float() * grad_scale``, then
    ``send_out.copy_(master)`` (rounded to nearest even), in one pass over each buffer.

    ``step`` counts updates from 1 (torch.optim's ``state["step"]`` after this update: the bias
    corrections use it). All tensors are flat and contiguous with the same length; master,
    exp_avg and exp_avg_sq fp32, grad_in any float dtype, send_out None or the compute dtype.
    ``grad_scale`` multiplies the gradient before the update (a clipping coefficient).
    """
    _check(master, grad_in, send_out, exp_avg, exp_avg_sq)
    if step < 1:
        raise ValueError(f"adamw_step_: step counts updates from 1, got {step}")

    def update(i: int, j: int) -> None:
        torch._fused_adamw_(
            [master[i:j]],
            [_widened(grad_in[i:j], grad_scale)],
            [exp_avg[i:j]],
            [exp_avg_sq[i:j]],
            [],
            [_step_tensor(step)],
            amsgrad=False,
            lr=lr,
            beta1=beta1,
            beta2=beta2,
            weight_decay=weight_decay,
            eps=eps,
            maximize=False,
        )
        if send_out is not None:
            send_out[i:j].copy_(master[i:j])

    in_ranges(master.numel(), update)


def sgd_step_(
    master: Tensor,
    grad_in: Tensor,
    momentum_buf: Tensor | None,
    send_out: Tensor | None,
    *,
    lr: float,
    momentum: float,
    weight_decay: float,
    grad_scale: float = 1.0,
) -> None:
    """torch.optim.SGD's update (no dampening, not Nesterov) by ``grad_in.float() * grad_scale``,
    then ``send_out.copy_(master)``, in one pass over each buffer.

    ``momentum_buf`` is None exactly when ``momentum`` is 0; otherwise it must hold zeros before
    the first step, which makes the first step's buffer the gradient itself, as torch.optim.SGD's
    clone does (0·momentum + g = g exactly).
    """
    if (momentum_buf is None) != (momentum == 0):
        raise ValueError("sgd_step_: pass a momentum buffer exactly when momentum is not 0")
    _check(master, grad_in, send_out, *([] if momentum_buf is None else [momentum_buf]))

    def update(i: int, j: int) -> None:
        torch._fused_sgd_(
            [master[i:j]],
            [_widened(grad_in[i:j], grad_scale)],
            [] if momentum_buf is None else [momentum_buf[i:j]],
            weight_decay=weight_decay,
            momentum=momentum,
            lr=lr,
            dampening=0.0,
            nesterov=False,
            maximize=False,
            is_first_step=False,
        )
        if send_out is not None:
            send_out[i:j].copy_(master[i:j])

    in_ranges(master.numel(), update)


def update_threads() -> int:
    """How many threads (cores) one call of adamw_step_ or sgd_step_ uses."""
    return _workers.threads or torch.get_num_threads()


def set_update_threads(threads: int) -> None:
    """Use ``threads`` threads, each with one intra-op thread, from the next call on."""
    if threads < 1:
        raise ValueError(f"set_update_threads: at least 1 thread, got {threads}")
    _workers.resize(threads)


def in_ranges(n: int, update: Callable[[int, int], object]) -> None:
    """``update(i, j)`` over [0, n) in chunks, split in contiguous ranges over the pool's threads.

    What the two steps above run; benchmarks/streaming.py measures memory bandwidth with it too.
    """
    if n <= CHUNK:
        update(0, n)
        return
    pool, threads = _workers.started()
    chunks = -(-n // CHUNK)
    per = -(-chunks // min(threads, chunks)) * CHUNK  # a range: whole chunks, the last one shorter

    def walk(start: int) -> None:
        for i in range(start, min(start + per, n), CHUNK):
            update(i, min(i + CHUNK, start + per, n))

    for future in [pool.submit(walk, start) for start in range(0, n, per)]:
        future.result()


class _Workers:
    """The pool, started on first use, every worker set to one intra-op thread before any work.

    torch.set_num_threads sets the calling thread's OpenMP thread count and a process-wide default
    that threads started later take up; the workers take theirs, then the starting thread puts the
    default back (leaving its own count as it was), so no other thread of the process sees a change.
    """

    def __init__(self) -> None:
        self.pool: ThreadPoolExecutor | None = None
        self.threads = 0  # 0: torch.get_num_threads() when first started
        self.lock = threading.Lock()

    def forget(self) -> None:
        self.pool, self.lock = None, threading.Lock()

    def resize(self, threads: int) -> None:
        with self.lock:
            if self.pool is not None and self.threads != threads:
                self.pool.shutdown(wait=True)
                self.pool = None
            self.threads = threads

    def started(self) -> tuple[ThreadPoolExecutor, int]:
        with self.lock:
            if self.pool is None:
                default = torch.get_num_threads()
                self.threads = self.threads or default
                ready = threading.Barrier(self.threads + 1)

                def one_thread() -> None:
                    torch.get_num_threads()  # PyTorch's per-thread set-up first, or it would undo ours
                    torch.set_num_threads(1)
                    ready.wait()

                self.pool = ThreadPoolExecutor(self.threads, "flowrate-host-update", initializer=one_thread)
                for _ in range(self.threads):
                    self.pool.submit(int)  # start every worker now
                ready.wait()
                torch.set_num_threads(default)
            return self.pool, self.threads


_workers = _Workers()
# a forked child (a data-loader worker) has none of the parent's threads (nor a lock they held)
os.register_at_fork(after_in_child=_workers.forget)


def _widened(grad: Tensor, scale: float) -> Tensor:
    """The chunk's gradient in fp32 times ``scale``: the gradient itself when nothing changes."""
    if grad.dtype == torch.float32 and scale == 1.0:
        return grad  # the fused kernels only read their gradients
    scratch = getattr(_local, "scratch", None)
    if scratch is None or scratch.numel() < grad.numel():
        scratch = _local.scratch = torch.empty(CHUNK, dtype=torch.float32)
    widened = scratch[: grad.numel()]
    widened.copy_(grad)
    if scale != 1.0:
        widened.mul_(scale)
    return widened


def _step_tensor(step: int) -> Tensor:
    """The fused kernel reads the step from a tensor: one per working thread, refilled."""
    tensor = getattr(_local, "step", None)
    if tensor is None:
        tensor = _local.step = torch.zeros((), dtype=torch.float32)
    tensor.fill_(float(step))
    return tensor


def _check(master: Tensor, grad: Tensor, send: Tensor | None, *state: Tensor) -> None:
    """The layout every caller must give; a mismatch is a bug in the caller, said in one line."""
    n = master.numel()
    for tensor in (master, grad, *state, *([] if send is None else [send])):
        if tensor.dim() != 1 or not tensor.is_contiguous() or tensor.numel() != n:
            raise ValueError(f"host update: every buffer must be flat and contiguous with {n} elements")
    if any(t.dtype != torch.float32 for t in (master, *state)):
        raise ValueError("host update: master weights and optimizer state must be fp32")
