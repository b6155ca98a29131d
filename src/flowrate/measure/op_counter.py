"""Every operator a step runs, counted at the dispatcher: FLOPs and bytes per (op, input dtypes).

``OpCounter`` is a ``TorchDispatchMode``: it sees each ATen op the step executes (forward and
backward), after autograd and after composite ops have decomposed, so what it counts is what ran.
FLOPs come from PyTorch's own formulas (``torch.utils.flop_counter``: matmuls, convolutions,
``_scaled_mm``), a few it lacks (matrix-vector, dot, integer and packed-weight GEMMs), and
flowrate.measure.attention_flops for every attention kernel (PyTorch's formulas miss the CPU's
fused kernel and causal masks). Bytes are each tensor argument read once and each output written
once (a broadcast or sliced view counts the smaller of its elements and its storage; view ops
move nothing and count 0; ``*_like``/``new_*`` factories read nothing). Higher-order operators
(flex_attention run eagerly) are not supported: the count fails and the run says so.

The coverage: which ops carried FLOPs, and which ran that look like compute (their name says
mm, matmul, einsum, linear, conv or attention) but have no formula, with their call counts, so a
count that misses a kernel says so instead of reading low.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from flowrate.measure.attention_flops import ATTENTION_OPS, count_attention
from flowrate.problems.flop_formulas import grouped_conv_backward_flops

# ops whose name says they compute, so a FLOP formula should exist; cummax/cummin, conversions
# and the upsampling kernels' "linear" interpolation only look like it
COMPUTE_NAME = re.compile(r"mm|matmul|einsum|linear|attention|conv")
NOT_COMPUTE = re.compile(r"cumm|convert|upsample")
# factories that take only a tensor's metadata (zeros_like, new_empty): their inputs are not read
_LIKE = re.compile(r"_like$|\.new_")

T = TypeVar("T")
aten = torch.ops.aten


def _by_output(operand: int) -> Callable[..., int]:
    """2 FLOPs per output element per element of the reduced dimension (``args[operand]``'s last)."""

    def flops(*args: Any, out_val: Any = None, **kwargs: Any) -> int:
        return 2 * out_val.numel() * args[operand].shape[-1]

    return flops


def _dot(a: torch.Tensor, *args: Any, out_val: Any = None, **kwargs: Any) -> int:
    return 2 * a.numel()


# Products torch's registry lacks: matrix-vector, dot, and the integer and packed-weight GEMMs
# that quantized inference runs (int8 weight-only and dynamic, int4 packed); and the convolution
# backward with grouped convolutions' weight gradient counted once, not once per group.
FORMULAS: dict[Any, Callable[..., int]] = {
    **flop_registry,
    aten.mv: _by_output(0),
    aten.addmv: _by_output(1),
    aten.dot: _dot,
    aten.vdot: _dot,
    aten._int_mm: _by_output(0),
    aten._weight_int8pack_mm: _by_output(0),
    aten._weight_int4pack_mm: _by_output(0),
    aten._weight_int4pack_mm_for_cpu: _by_output(0),
    aten.convolution_backward: grouped_conv_backward_flops,
}


@dataclass(frozen=True)
class OpCount:
    """One operator over one step, for one combination of input dtypes."""

    op: str  # "aten.mm"
    dtypes: tuple[str, ...]  # of its tensor inputs, in order: ("bfloat16", "bfloat16")
    flops: int
    bytes: int  # read + written
    calls: int


@dataclass(frozen=True)
class OpTally:
    """What one counted step ran: the per-op table and the coverage."""

    ops: tuple[OpCount, ...]  # most FLOPs first
    not_counted: dict[str, int]  # compute-looking op -> calls, none of which had a formula
    recomputed_flops: int  # attention backward's recomputation of Q·Kᵀ (inside total_flops)
    # attention without the recomputation, over every pair / over the pairs every mask keeps
    attention_full_flops: int
    attention_kept_flops: int

    @property
    def total_flops(self) -> int:
        return sum(o.flops for o in self.ops)

    @property
    def total_bytes(self) -> int:
        return sum(o.bytes for o in self.ops)

    @property
    def counted_ops(self) -> list[str]:
        """The ops that carried FLOPs, most first."""
        flops = self.flops_by_op()
        return sorted((op for op, n in flops.items() if n), key=lambda op: (-flops[op], op))

    def flops_by_op(self) -> dict[str, int]:
        total: dict[str, int] = defaultdict(int)
        for o in self.ops:
            total[o.op] += o.flops
        return dict(total)

    def flops_by_class(self) -> dict[str, int]:
        """FLOPs per op class: attention, convolution, matmul (the rest that carried FLOPs)."""
        total: dict[str, int] = defaultdict(int)
        for op, flops in self.flops_by_op().items():
            if flops:
                total[op_class(op)] += flops
        return dict(total)

    def to_dict(self, batch_size: int) -> dict[str, Any]:
        """The Result's ``operators`` section: this step's figures (for ``batch_size`` samples)."""
        return {
            "batch_size": batch_size,
            "flops": self.total_flops,
            "bytes": self.total_bytes,
            "recomputed_flops": self.recomputed_flops,
            "attention_full_flops": self.attention_full_flops,
            "attention_kept_flops": self.attention_kept_flops,
            "counted_ops": self.counted_ops,
            "not_counted": dict(self.not_counted),
            "ops": [
                {"op": o.op, "dtypes": list(o.dtypes), "flops": o.flops, "bytes": o.bytes, "calls": o.calls}
                for o in self.ops
            ],
        }


def op_class(op: str) -> str:
    if "attention" in op:
        return "attention"
    if "conv" in op:
        return "convolution"
    return "matmul"


class OpCounter(TorchDispatchMode):
    """Counts the ops run inside it; ``tally()`` gives the table. One use per instance."""

    def __init__(self) -> None:
        super().__init__()
        self._counts: dict[tuple[str, tuple[str, ...]], list[int]] = {}  # flops, bytes, calls
        self._uncounted: dict[str, int] = defaultdict(int)
        self._attention = [0, 0, 0]  # recomputed, full, kept

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        packet = func._overloadpacket
        known = packet in ATTENTION_OPS or packet in FORMULAS
        if not known:  # a composite op: count the ops it decomposes into, as torch's counter does
            with self:
                out = func.decompose(*args, **kwargs)
            if out is not NotImplemented:
                return out
        out = func(*args, **kwargs)
        self._record(func, str(packet), known, args, kwargs, out)
        return out

    def _record(self, func: Any, name: str, known: bool, args: Any, kwargs: Any, out: Any) -> None:
        inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        flops = 0
        if func._overloadpacket in ATTENTION_OPS:
            counted = count_attention(func, tuple(args), dict(kwargs))
            flops = counted.flops
            for n, value in enumerate((counted.recomputed, counted.full, counted.kept)):
                self._attention[n] += value
        elif known:
            flops = int(FORMULAS[func._overloadpacket](*args, **kwargs, out_val=out))
        elif COMPUTE_NAME.search(name) and not NOT_COMPUTE.search(name):
            self._uncounted[name] += 1
        moved = 0
        if not func.is_view:
            outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
            read = [] if _LIKE.search(name) else list({id(t): t for t in inputs}.values())
            moved = sum(map(_bytes, read)) + sum(map(_bytes, outputs))
        dtypes = tuple(str(t.dtype).removeprefix("torch.") for t in inputs)
        entry = self._counts.setdefault((name, dtypes), [0, 0, 0])
        entry[0] += flops
        entry[1] += moved
        entry[2] += 1

    def tally(self) -> OpTally:
        ops = [OpCount(op, dtypes, *values) for (op, dtypes), values in self._counts.items()]
        ops.sort(key=lambda o: (-o.flops, -o.bytes, o.op, o.dtypes))
        return OpTally(tuple(ops), dict(self._uncounted), *self._attention)


def _bytes(tensor: torch.Tensor) -> int:
    elements = tensor.numel() * tensor.element_size()
    try:
        return min(elements, tensor.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):  # tensor subclasses without a storage
        return elements


def count_ops(fn: Callable[[], T]) -> tuple[T, OpTally]:
    """Run ``fn`` (for real) under an OpCounter: its result and what it ran."""
    counter = OpCounter()
    with counter:
        result = fn()
    return result, counter.tally()
