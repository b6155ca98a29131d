"""Weight streaming's copies: weights in, gradients out, one copy per block and direction.

On a CUDA device each direction has a stream of its own (host to device, device to host), so the
backward's weight prefetch and its gradient copies out run at the same time, and a limiter keeps
at most ``depth`` blocks' copies in flight: the host, which runs ahead of the device, waits for
the oldest before queueing another, so copies never run further ahead of compute than that.

Device buffers are (re)allocated on the compute stream, which last used that memory, and the copy
stream waits for the compute stream's work queued so far before writing into them: the caching
allocator's reuse is then safe without ``record_stream`` on the incoming side.

On the CPU host and "device" are the same memory: a copy is a synchronous ``copy_`` into a
separate buffer (so releasing it really frees memory), timed on the host.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Protocol

import torch

from flowrate.execution.flat_params import BlockBuffers
from flowrate.execution.step_times import StepTimeline

COPIES_IN_FLIGHT = 2  # blocks: the one the device needs next and the one after it


class _Event(Protocol):
    def synchronize(self) -> None: ...


class CopyLimiter:
    """At most ``depth`` copies in flight: ``admit`` waits for the oldest once there are that many."""

    def __init__(self, depth: int = COPIES_IN_FLIGHT) -> None:
        self.depth = depth
        self._in_flight: deque[_Event] = deque()
        self.waits = 0  # how often the host had to wait (for the record and the tests)

    def admit(self) -> None:
        while len(self._in_flight) >= self.depth:
            self._in_flight.popleft().synchronize()
            self.waits += 1

    def issued(self, event: _Event) -> None:
        self._in_flight.append(event)

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)


class Copier:
    """Copies a block's groups to the device and their gradients back, timed in ``timeline``."""

    def __init__(self, device: torch.device, timeline: StepTimeline, depth: int = COPIES_IN_FLIGHT) -> None:
        self.device = device
        self.timeline = timeline
        self.cuda = device.type == "cuda"
        self._in: Any = torch.cuda.Stream(device) if self.cuda else None
        self._out: Any = torch.cuda.Stream(device) if self.cuda else None
        self.limiter = CopyLimiter(depth)

    def copy_in(self, buffers: BlockBuffers, pinned: bool) -> Any:
        """Allocate and fill a block's device weights in one copy; the event the compute stream
        must wait for (None on the CPU, where the copy is done when this returns)."""
        if not self.cuda:
            start = time.perf_counter()
            buffers.allocate()
            buffers.weights.copy_(buffers.host_send)
            self.timeline.current.copy_in_s += time.perf_counter() - start
            return None
        self.limiter.admit()
        compute = torch.cuda.current_stream(self.device)
        buffers.allocate()
        ready = torch.cuda.Event()
        ready.record(compute)
        begin, end = self.timeline.events("copy_in")
        with torch.cuda.stream(self._in):
            self._in.wait_event(ready)
            begin.record()
            buffers.weights.copy_(buffers.host_send, non_blocking=pinned)
            end.record()
        self.limiter.issued(end)
        return end

    def copy_out(self, buffers: BlockBuffers, pinned: bool) -> Any:
        """A block's flat device gradients to their host landing places in one copy, then free
        them; the event the host must wait for before reading them (None on the CPU)."""
        grad = buffers.grad
        assert grad is not None
        if not self.cuda:
            start = time.perf_counter()
            buffers.host_staging.copy_(grad)
            buffers.drop_gradients()
            self.timeline.current.copy_out_s += time.perf_counter() - start
            return None
        ready = torch.cuda.Event()
        ready.record(torch.cuda.current_stream(self.device))
        begin, end = self.timeline.events("copy_out")
        with torch.cuda.stream(self._out):
            self._out.wait_event(ready)
            begin.record()
            buffers.host_staging.copy_(grad, non_blocking=pinned)
            end.record()
        grad.record_stream(self._out)  # freed below; not reused before the copy ends
        buffers.drop_gradients()
        return end
