"""One step on fake tensors: every aten op with its FLOPs and bytes, and the memory the step keeps.

The model is built and the step runs under ``FakeTensorMode``: tensors carry shapes, dtypes and a
device (the CPU, so CPU autocast decides which ops run in 16 bits) but no data, so a 6.7B-parameter
model traces in about a second without allocating its weights. The batch is made for the meta
device and then moved, so a problem that caches tensors per device (ImageNet statistics, say)
never keeps a fake one where a real run would find it. A ``TorchDispatchMode`` on top sees
each aten op the step runs — forward, backward (autograd runs on fake tensors too) and the
optimizer's update — and records:

- **FLOPs** from ``torch.utils.flop_counter``'s registry of formulas (matmuls, convolutions,
  attention; 2 FLOPs per multiply-add), plus the CPU's fused attention kernel, which the registry
  lacks. A causal fused attention kernel skips the masked half of its square, so it is counted at
  half: the FLOPs here are the work a kernel does, which is what its time depends on.
- **Bytes**: the bytes of every tensor the op reads plus every tensor it writes (inputs plus
  outputs; an in-place op's target counts once read and once written). This is the standard
  roofline approximation: it ignores caches (an operand read twice counts twice, a tensor that
  stays in cache between two ops counts at each) and assumes nothing is read twice inside a
  kernel. A tensor's bytes are its elements x element size, capped by its storage (an expanded
  bias counts once).
- Views and metadata ops (view, transpose, detach, split, …) move no data and launch no kernel.

Memory: activations are the bytes autograd saves for backward (``saved_tensors_hooks``, each
storage once, parameters and buffers left out); the working set is the largest single op's
non-parameter inputs plus outputs (the peak of an inference step, and the transient on top of
the activations in training). Each op and each saved tensor is attributed to the problem's block
running at the time (``ModuleTracker`` follows blocks through backward as well).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
)
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.flop_counter import flop_registry, sdpa_backward_flop_count, sdpa_flop_count
from torch.utils.module_tracker import ModuleTracker

from flowrate.config import Mode, OptimizerName, Precision
from flowrate.errors import FlowrateError
from flowrate.problems.base import Problem

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


class TraceError(FlowrateError):
    """The step could not run on fake tensors; ``stage`` says where (build, batch, forward, …)."""

    def __init__(self, stage: str, detail: str) -> None:
        self.stage = stage
        self.detail = detail
        super().__init__(f"{stage}: {detail}")


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


@dataclass(frozen=True)
class BlockTrace:
    """What one block of the problem holds and keeps."""

    index: int
    name: str
    parameters: int
    input_bytes: int  # its input (kept instead of its activations when streaming recomputes)
    saved_bytes: int  # activations it saves for backward


@dataclass(frozen=True)
class StepTrace:
    """Every op of one step and the memory it keeps, for one configuration."""

    mode: Mode
    precision: Precision
    optimizer: OptimizerName
    batch_size: int
    ops: tuple[Op, ...]
    parameters: int
    weight_element_size: int  # bytes per element of the stored weights (2 for pure-bf16)
    compute_element_size: int  # bytes per element the matmuls run in (2 under bf16/fp16 autocast)
    saved_bytes: int  # activations saved for backward (0 for inference)
    working_bytes: int  # the largest single op's non-parameter inputs plus outputs
    blocks: tuple[BlockTrace, ...] | None  # None: the problem declares no blocks

    @property
    def optimizer_states(self) -> int:
        """Tensors the optimizer keeps per parameter: AdamW 2 (both moments), SGD 1 (momentum)."""
        if self.mode is not Mode.TRAIN:
            return 0
        return 2 if self.optimizer is OptimizerName.ADAMW else 1

    def flops(self, phase: str | None = None) -> int:
        return sum(op.flops for op in self.ops if phase is None or op.phase == phase)

    def bytes(self, phase: str | None = None) -> int:
        return sum(op.bytes for op in self.ops if phase is None or op.phase == phase)

    def kernels(self) -> int:
        return sum(op.kernel for op in self.ops)


def weight_dtype(precision: Precision) -> torch.dtype:
    return torch.bfloat16 if precision is Precision.PURE_BF16 else torch.float32


def compute_dtype(precision: Precision) -> torch.dtype:
    if precision in (Precision.BF16, Precision.PURE_BF16):
        return torch.bfloat16
    return torch.float16 if precision is Precision.FP16 else torch.float32


def trace_step(
    problem: Problem,
    *,
    mode: Mode,
    precision: Precision,
    optimizer: OptimizerName,
    batch_size: int,
) -> StepTrace:
    """Build ``problem``'s model and run one step of ``mode`` on fake tensors, recording every op.

    Raises TraceError naming the stage that failed (build, batch, forward, backward, optimizer).
    """
    from flowrate.execution.resident import make_optimizer

    cpu, meta = torch.device("cpu"), torch.device("meta")
    problem.set_precision(precision)
    with _fake_mode():
        model = _stage("build", problem.build_model)
        _convert(model, weight_dtype(precision))
        model.train(mode is Mode.TRAIN)
        batch = _stage("batch", lambda: problem.make_batch(batch_size, meta, torch.Generator()))
        batch = tree_map(lambda t: t.to(cpu) if isinstance(t, torch.Tensor) else t, batch)
        blocks = _blocks(problem, model)
        block_names = _block_names(model, blocks or [])
        opt = None
        if mode is Mode.TRAIN:
            params = [p for p in model.parameters() if p.requires_grad]
            opt = make_optimizer(optimizer, params, 1e-4, cpu)
        keep = {StorageWeakRef(t.untyped_storage()) for t in (*model.parameters(), *model.buffers())}
        inputs = _BlockInputs(blocks or [])
        with ModuleTracker() as tracker:
            recorder = _Recorder(tracker, block_names, keep, precision is Precision.TF32)
            autocast = _autocast(precision)
            with recorder, inputs:
                if opt is None:
                    with torch.inference_mode(), autocast:
                        _stage("forward", lambda: problem.loss(model, batch))
                else:
                    with torch.autograd.graph.saved_tensors_hooks(recorder.pack, lambda t: t), autocast:
                        loss = _stage("forward", lambda: problem.loss(model, batch))
                    _stage("backward", loss.backward)
                    recorder.phase = OPTIMIZER
                    with recorder.paused():  # the first step only makes the optimizer's state
                        _stage("optimizer", opt.step)
                    _stage("optimizer", opt.step)
    block_traces = None
    if blocks is not None:
        block_traces = tuple(
            BlockTrace(
                index=i,
                name=block_names[i][0],
                parameters=sum(p.numel() for p in block.parameters()),
                input_bytes=inputs.bytes[i],
                saved_bytes=recorder.saved_by_block.get(i, 0),
            )
            for i, block in enumerate(blocks)
        )
    return StepTrace(
        mode=mode,
        precision=precision,
        optimizer=optimizer,
        batch_size=batch_size,
        ops=tuple(recorder.ops),
        parameters=sum(p.numel() for p in model.parameters()),
        weight_element_size=weight_dtype(precision).itemsize,
        compute_element_size=compute_dtype(precision).itemsize,
        saved_bytes=sum(recorder.saved_by_block.values()),
        working_bytes=recorder.working_bytes,
        blocks=block_traces,
    )


@contextlib.contextmanager
def _quiet_fake_tensors() -> Iterator[None]:
    """FakeTensorMode logs a traceback for every op that fails; the failure is reported once, as a
    TraceError, so its log is silenced meanwhile."""
    import logging

    log = logging.getLogger("torch._subclasses.fake_tensor")
    saved = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(saved)


def is_kernel(func: Any) -> bool:
    """Whether an op moves data (and launches a kernel): aten ops other than views and metadata."""
    return bool(func.namespace == "aten" and not func.is_view and func.overloadpacket not in _NO_DATA)


def _stage(stage: str, call: Callable[[], Any]) -> Any:
    try:
        with _quiet_fake_tensors():
            return call()
    except FlowrateError:
        raise
    except (DataDependentOutputException, DynamicOutputShapeException) as error:
        raise TraceError(
            stage,
            f"the step reads tensor values ({type(error).__name__}: {error}), which the meta device "
            "cannot; shapes and memory past this point are not checked",
        ) from error
    except Exception as error:
        raise TraceError(stage, describe_error(error)) from error


def describe_error(error: BaseException) -> str:
    """'RuntimeError: mat1 and mat2 shapes cannot be multiplied (my_model.py:23)': the error and
    the last line outside PyTorch and flowrate that led to it (the user's, where there is one)."""
    import traceback
    from pathlib import Path

    frames = traceback.extract_tb(error.__traceback__)
    torch_dir = str(Path(torch.__file__).parent)
    flowrate_dir = str(Path(__file__).parents[1])
    outside = [f for f in frames if not f.filename.startswith((torch_dir, flowrate_dir))]
    chosen = outside[-1] if outside else (frames[-1] if frames else None)
    where = f" ({Path(chosen.filename).name}:{chosen.lineno})" if chosen else ""
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {message}{where}"


def _autocast(precision: Precision) -> Any:
    dtype = {Precision.BF16: torch.bfloat16, Precision.FP16: torch.float16}.get(precision)
    return torch.autocast("cpu", dtype=dtype) if dtype is not None else contextlib.nullcontext()


@functools.cache
def _fake_mode() -> FakeTensorMode:
    """One fake mode for the process: a problem may cache tensors it made (keyed by device: the
    meta device here, never a real run's), and a cached fake tensor is only usable in its mode."""
    return FakeTensorMode(allow_non_fake_inputs=True)


def _convert(model: nn.Module, dtype: torch.dtype) -> None:
    """``model.to(dtype)`` for fake tensors, whose ``_apply`` cannot swap parameters in place:
    each floating parameter and buffer is replaced, a tied one by the same new one."""
    replaced: dict[int, torch.Tensor] = {}
    for module in model.modules():
        for name, value in [*module.named_parameters(recurse=False), *module.named_buffers(recurse=False)]:
            if not value.is_floating_point() or value.dtype == dtype:
                continue
            if id(value) not in replaced:
                cast = value.detach().to(dtype)
                is_parameter = isinstance(value, nn.Parameter)
                replaced[id(value)] = nn.Parameter(cast, value.requires_grad) if is_parameter else cast
            new = replaced[id(value)]
            if isinstance(new, nn.Parameter):
                module.register_parameter(name, new)
            else:
                module.register_buffer(name, new)


def _blocks(problem: Problem, model: nn.Module) -> list[nn.Module] | None:
    try:
        return problem.blocks(model)
    except FlowrateError:
        return None


def _block_names(model: nn.Module, blocks: Sequence[nn.Module]) -> list[tuple[str, str]]:
    """(short name, ModuleTracker's name) per block: 'blocks.3', 'GPT.blocks.3'."""
    names = {id(module): name for name, module in model.named_modules()}
    root = type(model).__name__
    out = []
    for i, block in enumerate(blocks):
        name = names.get(id(block), f"block {i}")
        out.append((name or root, f"{root}.{name}" if name else root))
    return out


def _tensor_bytes(tensor: torch.Tensor) -> int:
    size = tensor.numel() * tensor.element_size()
    try:
        return min(size, tensor.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):
        return size


def _tensors(value: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]


def _argument(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> Any:
    for i, argument in enumerate(func._schema.arguments):
        if argument.name == name:
            return args[i] if i < len(args) else kwargs.get(name, argument.default_value)
    return None


_MATMUL = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "_int_mm"}
_CONV = {"convolution", "_convolution", "convolution_backward", "cudnn_convolution", "mkldnn_convolution"}


def _classify(
    func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], tensors: tuple[torch.Tensor, ...]
) -> tuple[str, str, int]:
    """(kind, elementwise key, elements) of a kernel; see Op."""
    name = func.overloadpacket.__name__
    if name.startswith(("_fused_adam", "_fused_sgd")):
        return "optimizer", name, sum(t.numel() for t in _tensors(args[0]))
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


def _thinnest(kind: str, name: str, args: tuple[Any, ...], outputs: list[torch.Tensor]) -> int:
    """The smallest GEMM dimension of a matmul or convolution (see Op.thin)."""
    if kind == "matmul":
        a, b = (args[0], args[1]) if name in ("mm", "bmm", "_int_mm") else (args[1], args[2])
        return int(min(a.shape[-2], a.shape[-1], b.shape[-1]))
    # a convolution is thin in its pixels only: libraries vectorise over channels in blocks, but
    # few output pixels (a late stage at a small image) leave the cores little to share
    out = args[0] if kind.endswith("backward") else outputs[0]  # (B, C_out, H_out, W_out)
    return int(out.shape[0] * math.prod(out.shape[2:]))


def _mutated(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    written = []
    for i, argument in enumerate(func._schema.arguments):
        if argument.alias_info is not None and argument.alias_info.is_write:
            written += _tensors(args[i] if i < len(args) else kwargs.get(argument.name))
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


class _BlockInputs:
    """Forward pre-hooks that note the bytes of each block's input (its first tensor argument)."""

    def __init__(self, blocks: Sequence[nn.Module]) -> None:
        self.blocks = blocks
        self.bytes = [0] * len(blocks)
        self._handles: list[Any] = []

    def __enter__(self) -> _BlockInputs:
        for i, block in enumerate(self.blocks):
            self._handles.append(block.register_forward_pre_hook(self._hook(i)))
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()

    def _hook(self, index: int) -> Callable[[nn.Module, Any], None]:
        def note(module: nn.Module, args: Any) -> None:
            tensors = _tensors(args)
            if tensors and not self.bytes[index]:
                self.bytes[index] = _tensor_bytes(tensors[0])

        return note


class _Recorder(TorchDispatchMode):
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
        self._saved: set[StorageWeakRef] = set()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        recorded = len(self.ops)
        yield
        del self.ops[recorded:]

    def _block(self) -> int | None:
        found = [self.block_of[name] for name in self.tracker.parents if name in self.block_of]
        return max(found) if found else None

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
        if not kernel:
            self.ops.append(Op(str(func), phase, self._block(), 0, 0, "fp32", False))
            return out
        inputs, outputs = _tensors((args, kwargs)), _tensors(out)
        if not outputs:  # an op that only mutates its arguments (the fused optimizer) writes them
            outputs = _mutated(func, args, kwargs)
        flops = _flops(func, args, kwargs, out)
        moved = sum(_tensor_bytes(t) for t in (*inputs, *outputs))
        kind, key, elements = _classify(func, args, kwargs, (*inputs, *outputs))
        thin = _thinnest(kind, key, args, outputs) if kind.startswith(("matmul", "conv")) else 0
        if phase != OPTIMIZER:
            transient = sum(
                _tensor_bytes(t)
                for t in (*inputs, *outputs)
                if StorageWeakRef(t.untyped_storage()) not in self.parameter_storages
            )
            self.working_bytes = max(self.working_bytes, transient)
        floats = [t.dtype for t in inputs if t.is_floating_point()]
        precision = _FLOAT_KEYS.get(floats[0], "fp32") if floats else "fp32"
        if precision == "fp32" and self.tf32:
            precision = "tf32"
        self.ops.append(
            Op(str(func), phase, self._block(), flops, moved, precision, True, kind, key, elements, thin)
        )
        return out
