"""Each aten op of a traced step: its FLOPs, bytes, kind and precision, and the mode recording them.

The conventions (what counts as a FLOP, a byte moved, a kernel) are flowrate.estimate.trace's.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry, sdpa_backward_flop_count, sdpa_flop_count
from torch.utils.module_tracker import ModuleTracker

FORWARD, BACKWARD, OPTIMIZER = "forward", "backward", "optimizer"

_aten = torch.ops.aten
# Ops whose schema does not mark them as views but which move no data and launch no kernel.
_NO_DATA = {
    _aten._unsafe_view,
    _aten.lift_fresh,
    _aten.empty,
    _aten.empty_like,
    _aten.empty_strided,
    _aten.new_empty,
    _aten.new_empty_strided,
    _aten._local_scalar_dense,
}
# The CPU's fused attention kernel and its backward: same shapes as the CUDA flash kernel, but
# absent from flop_counter's registry.
_CPU_ATTENTION = _aten._scaled_dot_product_flash_attention_for_cpu
_CPU_ATTENTION_BACKWARD = _aten._scaled_dot_product_flash_attention_for_cpu_backward
_FLOAT_KEYS = {torch.bfloat16: "bf16", torch.float16: "fp16"}


@dataclass(frozen=True)
class Op:
    """One aten op of the step."""

    name: str  # the op's name, e.g. "aten.mm.default"
    phase: str  # forward, backward or optimizer
    block: int | None  # index into the problem's blocks; None outside them (loss, optimizer)
    flops: int  # 2 per multiply-add; a causal fused attention counts its unmasked half
    bytes: int  # read + written
    precision: str  # the peak-table key its FLOPs run at: fp32, tf32, bf16, fp16
    kernel: bool  # False for views and metadata ops (no data moved, nothing launched)
    # matmul, conv (conv3x3 for 3x3 stride 1), attention, each maybe with _backward (priced by
    # FLOPs at the class's rate), optimizer (by parameters), elementwise (by elements where a
    # calibration has the key; by bytes always)
    kind: str = "elementwise"
    # what calibration.elementwise is keyed by: the op's name, with [tanh] for tanh-GELU
    key: str = ""
    # elements of the largest tensor it touches (parameters, for the optimizer)
    elements: int = 0
    # the smallest dimension of a matmul (m, n, k), a convolution's output pixels (batch x
    # H_out x W_out); 0 for other ops
    thin: int = 0
    # the class whose dispatch cost it pays (flowrate.estimate.overheads.DISPATCH_CLASSES, or
    # optimizer); "" for what never reaches the dispatcher in a real run (fake tensors' device
    # queries, the profiler's markers)
    dispatch: str = ""
    # whether it makes an autograd node: a forward op, with grad enabled, on a tensor that
    # requires grad
    node: bool = False
    # tensors it updates (the fused optimizer); 0 for other ops
    tensors: int = 0


def is_kernel(func: Any) -> bool:
    """Whether an op moves data (and launches a kernel): aten ops other than views and metadata."""
    return bool(func.namespace == "aten" and not func.is_view and func.overloadpacket not in _NO_DATA)


def tensor_bytes(tensor: torch.Tensor) -> int:
    """Elements x element size, capped by the storage (an expanded bias counts once)."""
    size = tensor.numel() * tensor.element_size()
    try:
        return min(size, tensor.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):
        return size


def tensors_in(value: Any) -> list[torch.Tensor]:
    """Every tensor in a nested structure of arguments or outputs."""
    return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]


def _argument(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> Any:
    for i, argument in enumerate(func._schema.arguments):
        if argument.name == name:
            return args[i] if i < len(args) else kwargs.get(name, argument.default_value)
    return None


_MATMUL = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "_int_mm"}
# Kernels that copy or gather data (dispatched like a copy), and kernels that make a tensor from
# nothing (dispatched like an elementwise op); other kernels without the pointwise tag are
# reductions, normalisations, softmaxes, losses and pooling.
_COPY = {
    "clone",
    "_to_copy",
    "copy_",
    "cat",
    "stack",
    "index_select",
    "embedding",
    "embedding_dense_backward",
    "constant_pad_nd",
    "repeat",
    "index",
    "gather",
}
# Kernels that gather rows of their first argument (an embedding table): they read what they
# write, whatever the table's size.
_GATHERS = {"embedding", "index_select", "gather", "index"}
# Batch normalisation in training reduces each channel over the whole batch before it can write a
# value, so a tensor larger than the cache is read twice: the forward reads its input for the
# statistics and again to normalise; the backward reads the gradient and the input for its two
# reductions and again for the input's gradient. Op -> (where its ``training`` flag is, how many
# leading tensor arguments the second pass reads again).
_TWO_PASS = {
    "_native_batch_norm_legit": (5, 1),
    "native_batch_norm": (5, 1),
    "native_batch_norm_backward": (7, 2),
}
_FACTORIES = {
    "zeros_like",
    "ones_like",
    "full_like",
    "arange",
    "zeros",
    "ones",
    "full",
    "scalar_tensor",
    "fill_",
    "zero_",
    "new_zeros",
    "new_ones",
    "new_full",
}
_CONV = {"convolution", "_convolution", "convolution_backward", "cudnn_convolution", "mkldnn_convolution"}


def _classify(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], tensors: tuple[torch.Tensor, ...]
) -> tuple[str, str, int]:
    """(kind, elementwise key, elements) of a kernel; see Op."""
    name = func.overloadpacket.__name__
    if name.startswith(("_fused_adam", "_fused_sgd")):
        return "optimizer", name, sum(t.numel() for t in tensors_in(args[0]))
    elements = max((t.numel() for t in tensors), default=0)
    if name in _MATMUL:
        return "matmul", name, elements
    backward = "_backward" if name.endswith("backward") else ""
    if name in _CONV:
        weight = args[2] if backward else args[1]  # (C_out, C_in, kh, kw)
        stride = _argument(func, args, kwargs, "stride")
        winograd = tuple(weight.shape[2:]) == (3, 3) and all(s == 1 for s in stride or (1,))
        return ("conv3x3" if winograd else "conv") + backward, name, elements
    if "attention" in name:
        return "attention" + backward, name, elements
    if name.startswith("gelu") and _argument(func, args, kwargs, "approximate") == "tanh":
        name += "[tanh]"
    return "elementwise", name, elements


def dispatch_class(func: Any, kind: str) -> str:
    """The class whose dispatch cost a kernel pays (see Op.dispatch)."""
    if kind.startswith(("matmul", "conv", "attention")):
        return "matmul"
    if kind == "optimizer":
        return "optimizer"
    name = func.overloadpacket.__name__
    if name in _COPY:
        return "copy"
    if torch.Tag.pointwise in func.tags or name in _FACTORIES:
        return "elementwise"
    return "reduction"


# The operator classes a profile's time and the cost model's are compared by (op_class), in the
# order they are shown: the kinds the cost model prices by FLOPs (matmul, conv, attention) or by
# parameters (optimizer), the gathers from an embedding table, the other copies, every other
# kernel (elementwise, normalisation, reduction, softmax, loss, pooling: priced by elements or
# bytes), views and metadata (their dispatch alone), and the framework's time outside every op.
OP_CLASSES = (
    "matmul",
    "conv",
    "attention",
    "embedding",
    "copy",
    "elementwise",
    "optimizer",
    "view",
    "framework",
)


_COMPOSITE = torch._C.DispatchKey.CompositeImplicitAutograd


def op_class(name: str) -> str:
    """The class (OP_CLASSES) of an op as the cost model names it ("aten.mm.default") or as the
    profiler does ("aten::mm"); an event that is no ATen op (autograd's engine, the optimizer's
    step marker, the host's time between operators) is "framework", and so is a composite op
    (aten::linear, aten::layer_norm), which decomposes into the kernels the cost model prices
    before any runs: its self time is its wrapper's. The classes follow what
    prices an op in flowrate.estimate.cost (_classify's kinds and dispatch_class's copies)."""
    if name.startswith("aten::"):
        base = name[len("aten::") :]
    elif name.startswith("aten."):
        base = name.split(".")[1]
    else:
        return "framework"
    packet = getattr(_aten, base, None)
    main = getattr(packet, packet.overloads()[0]) if packet is not None and packet.overloads() else None
    if main is not None and main.has_kernel_for_dispatch_key(_COMPOSITE):
        return "framework"  # decomposed before any kernel: its own time is the wrapper's
    if base.startswith(("_fused_adam", "_fused_sgd")):
        return "optimizer"
    if base in _MATMUL:
        return "matmul"
    if base in _CONV:
        return "conv"
    if "attention" in base:
        return "attention"
    if base in _GATHERS or base.startswith("embedding"):
        return "embedding"
    if base in _COPY:
        return "copy"
    if packet in _NO_DATA or (main is not None and main.is_view):
        return "view"
    return "elementwise"


def _thinnest(kind: str, name: str, args: tuple[Any, ...], outputs: list[torch.Tensor]) -> int:
    """The smallest GEMM dimension of a matmul or convolution (see Op.thin)."""
    if kind == "matmul":
        a, b = (args[0], args[1]) if name in ("mm", "bmm", "_int_mm") else (args[1], args[2])
        return int(min(a.shape[-2], a.shape[-1], b.shape[-1]))
    # a convolution is thin in its pixels only: libraries vectorise over channels in blocks, but
    # few output pixels (a late stage at a small image) leave the cores little to share
    out = args[0] if kind.endswith("backward") else outputs[0]  # (B, C_out, H_out, W_out)
    return int(out.shape[0] * math.prod(out.shape[2:]))


def _read_again(name: str, args: tuple[Any, ...]) -> int:
    """The bytes a two-pass kernel (_TWO_PASS) reads a second time; 0 for every other op."""
    if name not in _TWO_PASS:
        return 0
    flag, reread = _TWO_PASS[name]
    if len(args) <= flag or args[flag] is not True:  # .no_stats, or running statistics: one pass
        return 0
    return sum(tensor_bytes(t) for t in args[:reread] if isinstance(t, torch.Tensor))


def _mutated(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    written = []
    for i, argument in enumerate(func._schema.arguments):
        if argument.alias_info is not None and argument.alias_info.is_write:
            written += tensors_in(args[i] if i < len(args) else kwargs.get(argument.name))
    return written


def _flops(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    packet = func.overloadpacket
    if packet is _CPU_ATTENTION:
        flops = sdpa_flop_count(args[0].shape, args[1].shape, args[2].shape)
    elif packet is _CPU_ATTENTION_BACKWARD:
        flops = sdpa_backward_flop_count(args[0].shape, args[1].shape, args[2].shape, args[3].shape)
    elif packet in flop_registry:
        flops = flop_registry[packet](*args, **kwargs, out_val=out)
    else:
        return 0
    if "attention" in packet.__name__ and _argument(func, args, kwargs, "is_causal"):
        flops //= 2  # the kernel skips the masked half of the square
    return int(flops)


class OpRecorder(TorchDispatchMode):
    """Records each aten op the step runs as an Op, and the bytes autograd saves per block."""

    def __init__(
        self,
        tracker: ModuleTracker,
        block_names: list[tuple[str, str]],
        parameter_storages: set[StorageWeakRef],
        tf32: bool,
    ) -> None:
        super().__init__()
        self.tracker = tracker
        self.block_of = {tracker_name: i for i, (_, tracker_name) in enumerate(block_names)}
        self.parameter_storages = parameter_storages
        self.tf32 = tf32
        self.phase = FORWARD
        self.ops: list[Op] = []
        self.saved_by_block: dict[int | None, int] = {}
        self.working_bytes = 0
        self.module_calls: dict[int | None, int] = {}
        self._saved: set[StorageWeakRef] = set()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        recorded = len(self.ops)
        yield
        del self.ops[recorded:]

    def _block(self) -> int | None:
        found = [self.block_of[name] for name in self.tracker.parents if name in self.block_of]
        return max(found) if found else None

    def module_called(self, module: Any, args: Any) -> None:
        """A global forward pre-hook: count the module call in the block running it."""
        if self.phase != OPTIMIZER:
            block = self._block()
            self.module_calls[block] = self.module_calls.get(block, 0) + 1

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        """saved_tensors_hooks' pack: count each saved storage once, parameters not at all."""
        key = StorageWeakRef(tensor.untyped_storage())
        if key not in self.parameter_storages and key not in self._saved:
            self._saved.add(key)
            block = self._block()
            self.saved_by_block[block] = self.saved_by_block.get(block, 0) + tensor.untyped_storage().nbytes()
        return tensor

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        packet = func.overloadpacket
        aten = func.namespace == "aten"
        if aten and packet not in flop_registry and packet not in (_CPU_ATTENTION, _CPU_ATTENTION_BACKWARD):
            # Composite ops (matmul, linear under inference_mode) reach the mode undecomposed;
            # record the ops they run, as FlopCounterMode does.
            with self:
                decomposed = func.decompose(*args, **kwargs)
            if decomposed is not NotImplemented:
                return decomposed
        out = func(*args, **kwargs)
        phase = self.phase
        if phase == FORWARD and torch._C._current_graph_task_id() != -1:
            phase = BACKWARD
        kernel = is_kernel(func)
        inputs = tensors_in((args, kwargs))
        # factories (the seed of backward's ones) make no node whatever their input
        node = (
            aten
            and phase == FORWARD
            and torch.is_grad_enabled()
            and packet.__name__ not in _FACTORIES
            and any(t.requires_grad for t in inputs)
        )
        if not kernel:
            dispatch = "view" if aten else ""
            self.ops.append(
                Op(str(func), phase, self._block(), 0, 0, "fp32", False, dispatch=dispatch, node=node)
            )
            return out
        outputs = tensors_in(out)
        if not outputs:  # an op that only mutates its arguments (the fused optimizer) writes them
            outputs = _mutated(func, args, kwargs)
        flops = _flops(func, args, kwargs, out)
        moved = sum(tensor_bytes(t) for t in (*inputs, *outputs))
        if packet.__name__ in _GATHERS:  # reads the rows it gathers, not the whole source
            moved = sum(tensor_bytes(t) for t in inputs[1:]) + 2 * sum(tensor_bytes(t) for t in outputs)
        moved += _read_again(packet.__name__, args)
        kind, key, elements = _classify(func, args, kwargs, (*inputs, *outputs))
        thin = _thinnest(kind, key, args, outputs) if kind.startswith(("matmul", "conv")) else 0
        if phase != OPTIMIZER:
            transient = sum(
                tensor_bytes(t)
                for t in (*inputs, *outputs)
                if StorageWeakRef(t.untyped_storage()) not in self.parameter_storages
            )
            self.working_bytes = max(self.working_bytes, transient)
        floats = [t.dtype for t in inputs if t.is_floating_point()]
        precision = _FLOAT_KEYS.get(floats[0], "fp32") if floats else "fp32"
        if precision == "fp32" and self.tf32:
            precision = "tf32"
        tensors = len(tensors_in(args[0])) if kind == "optimizer" else 0
        self.ops.append(
            Op(
                str(func),
                phase,
                self._block(),
                flops,
                moved,
                precision,
                True,
                kind,
                key,
                elements,
                thin,
                dispatch_class(func, kind),
                node,
                tensors,
            )
        )
        return out
