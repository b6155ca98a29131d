"""Weight streaming's host side: one arena of host memory per block, and whether the model fits.

A block keeps in host memory, per dtype group of its parameters (flowrate.execution.flat_params):
the fp32 master weights, the optimizer state of flowrate's own optimizers, the copy sent to the
device (a bf16 copy; fp32 groups send the master itself) and, when it trains, the landing place of
its gradient in the dtype it leaves the device in. All of it is one allocation per block (an
arena), carved into flat views, so the block's copies are one transfer per direction and group.

For a CUDA device the arena is page-locked ("pinned"), which makes the copies asynchronous and
faster. PyTorch's pinned allocator rounds every allocation up to a power of two, so the arena's
real size is counted, not its requested one, and an arena is pinned only while the rounded size
leaves room for the arenas of the blocks still to place (``may_pin``). Pinned memory is limited:
an arena that is not or cannot be pinned is pageable, with a warning, and only that block's copies
are synchronous.
"""

from __future__ import annotations

import psutil
import torch

from flowrate.config import Mode, OptimizerName, Precision
from flowrate.errors import OutOfMemory
from flowrate.units import gib

ALIGN = 64  # bytes: every view starts on a cache line, so any dtype's view of the arena is aligned


def host_bytes_per_parameter(mode: Mode, precision: Precision, optimizer: OptimizerName) -> int:
    """Host memory a streamed parameter needs: what check_host_memory compares with RAM.

    Training: fp32 master (4) + optimizer state (AdamW 8, SGD momentum 4) + fp32 gradient (4)
    + a compute-precision copy to send (2 in bf16; fp32 sends the master) + its gradient staging
    in the compute precision (2 in bf16, 4 in fp32). Inference: master and the copy to send.
    An upper bound: bf16 groups land their gradients in bf16 only, and fp32 parameters (norms,
    embedding tables) send their master.
    """
    compute = 2 if precision is Precision.BF16 else 4
    shadow = compute if compute != 4 else 0
    if mode is Mode.INFER:
        return 4 + shadow
    state = 4 if optimizer is OptimizerName.SGD else 8
    return 4 + state + 4 + shadow + compute


def check_host_memory(parameters: int, per_parameter: int, available: int | None = None) -> int:
    """Refuse, with the numbers, a model whose host-side state does not fit in available RAM."""
    needed = parameters * per_parameter
    available = psutil.virtual_memory().available if available is None else available
    if needed > available:
        raise OutOfMemory(
            f"streaming needs {gib(needed)} of host memory for {parameters:,} parameters "
            f"({per_parameter} bytes each: fp32 master weights, optimizer state, gradients and the "
            f"copy sent to the device) but {gib(available)} is available: use a smaller model, "
            "--optimizer sgd, or a host with more memory"
        )
    return needed


def pinned_size(nbytes: int) -> int:
    """What PyTorch's caching host allocator really takes for ``nbytes``: the next power of two."""
    return 1 << max(nbytes - 1, 0).bit_length()


def may_pin(requested: int, still_to_place: int, available: int) -> bool:
    """Whether an arena of ``requested`` bytes may be page-locked: pinned it takes
    ``pinned_size(requested)`` (up to twice as much), and what is left must still hold the
    ``still_to_place`` bytes the later blocks' arenas need. Pinning is a speed-up; running out of
    host memory for a later block is a failed run, so the later blocks come first."""
    return pinned_size(requested) + still_to_place <= available


def room_to_pin(requested: int, parameters: int, later_parameters: int) -> bool:
    """``may_pin`` for a block of ``parameters`` whose arena asks ``requested`` bytes, the blocks
    after it (``later_parameters`` in all) assumed to need as many host bytes per parameter."""
    still_to_place = int(requested / max(parameters, 1) * later_parameters)
    return may_pin(requested, still_to_place, psutil.virtual_memory().available)


def pageable_note(unpinned: int, streamed: int) -> str:
    """The run's warning when ``room_to_pin`` kept blocks pageable."""
    return (
        f"{unpinned} of {streamed} streamed blocks keep their host memory pageable: pinning rounds "
        "each block's host memory up to a power of two, and pinning more would leave too little "
        "for the others; their copies are slower and not asynchronous"
    )


class HostArena:
    """One block's host memory: one allocation, handed out as aligned flat views (``take``).

    Sizes are planned first (``reserve`` returns each view's offset), then ``allocate`` makes the
    one buffer; ``view`` gives a reserved range in its dtype.
    """

    def __init__(self) -> None:
        self.requested = 0
        self.buffer: torch.Tensor | None = None
        self.pinned = False

    def reserve(self, numel: int, dtype: torch.dtype) -> tuple[int, int, torch.dtype]:
        """Plan a flat view of ``numel`` elements of ``dtype``; what ``view`` takes later."""
        offset = -(-self.requested // ALIGN) * ALIGN
        self.requested = offset + numel * dtype.itemsize
        return offset, numel, dtype

    def allocate(self, pin: bool) -> str | None:
        """Make the buffer (pinned if ``pin`` and possible); a warning when pinning failed."""
        size = max(self.requested, 1)
        if pin:
            try:
                self.buffer = torch.empty(size, dtype=torch.uint8, pin_memory=True)
                self.pinned = True
                return None
            except RuntimeError as error:  # page-locked memory is a limited resource
                self.buffer = torch.empty(size, dtype=torch.uint8)
                return (
                    f"pinned host memory could not be allocated ({error}); streaming falls back to "
                    "pageable memory for that block, whose copies are slower and not asynchronous"
                )
        self.buffer = torch.empty(size, dtype=torch.uint8)
        return None

    def view(self, planned: tuple[int, int, torch.dtype]) -> torch.Tensor:
        offset, numel, dtype = planned
        assert self.buffer is not None, "allocate() the arena before taking views of it"
        return self.buffer[offset : offset + numel * dtype.itemsize].view(dtype)

    @property
    def nbytes(self) -> int:
        """Host bytes this arena really holds (a pinned one rounded as the allocator rounds it)."""
        size = max(self.requested, 1)
        return pinned_size(size) if self.pinned else size
