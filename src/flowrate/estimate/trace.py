"""One step on fake tensors: every aten op with its FLOPs and bytes, and the memory the step keeps.

The model is built and the step runs under ``FakeTensorMode``: tensors carry shapes, dtypes and a
device (the CPU, so CPU autocast decides which ops run in 16 bits) but no data, so a 6.7B-parameter
model traces in about a second without allocating its weights. The batch is made for the meta
device and then moved, so a problem that caches tensors per device (ImageNet statistics, say)
never keeps a fake one where a real run would find it. A ``TorchDispatchMode`` on top sees
each aten op the step runs — forward, backward (autograd runs on fake tensors too) and the
optimizer's update — and records (flowrate.estimate.ops):

- **FLOPs** from ``torch.utils.flop_counter``'s registry of formulas (matmuls, convolutions,
  attention; 2 FLOPs per multiply-add), plus the CPU's fused attention kernel, which the registry
  lacks. A causal fused attention kernel skips the masked half of its square, so it is counted at
  half: the FLOPs here are the work a kernel does, which is what its time depends on.
- **Bytes**: every tensor the op reads plus every tensor it writes (an in-place op's target
  counts once read and once written): the roofline approximation, which ignores caches and reads
  nothing twice inside a kernel, except training BatchNorm, whose input (the backward's gradient
  and input) counts twice (ops._TWO_PASS). Gathers count the rows they move, not their table. A
  tensor's bytes are its elements x element size, capped by its storage (expanded: once).
- Views and metadata ops (view, transpose, detach, split, …) move no data and launch no kernel.
- The framework's work that the overhead terms (flowrate.estimate.overheads) price: each op's
  dispatch class, whether it makes an autograd node, the ``nn.Module`` calls per block and the
  trained parameter tensors per block (one AccumulateGrad node each).

Memory: activations are the bytes autograd saves for backward (``saved_tensors_hooks``, each
storage once, parameters and buffers left out); the working set is the largest single op's
non-parameter inputs plus outputs (the peak of an inference step, and the transient on top of
the activations in training). Each op and each saved tensor is attributed to the problem's block
running at the time (``ModuleTracker`` follows blocks through backward as well).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
)
from torch.multiprocessing.reductions import StorageWeakRef
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_map
from torch.utils.module_tracker import ModuleTracker

from flowrate.config import Mode, OptimizerName, Precision
from flowrate.errors import FlowrateError
from flowrate.estimate.ops import OPTIMIZER, Op, OpRecorder, tensor_bytes, tensors_in
from flowrate.execution.resident import make_optimizer
from flowrate.problems.base import Problem

NATIVE, FUSED, EXPLICIT = "native", "fused", "explicit"  # trace_step's ``attention``

_CPU = torch.device("cpu")


class TraceError(FlowrateError):
    """The step could not run on fake tensors; ``stage`` says where (build, batch, forward, …)."""

    def __init__(self, stage: str, detail: str) -> None:
        self.stage = stage
        self.detail = detail
        super().__init__(f"{stage}: {detail}")


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
    # block index (None: outside every block) -> nn.Module calls in the forward
    module_calls: dict[int | None, int] = field(default_factory=dict)
    # block index -> trained parameter tensors (each an AccumulateGrad node; empty for inference)
    trained_tensors: dict[int | None, int] = field(default_factory=dict)

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
    attention: str = NATIVE,
) -> StepTrace:
    """Build ``problem``'s model and run one step of ``mode`` on fake tensors, recording every op.
    ``attention`` (ATTENTION): how ``scaled_dot_product_attention`` is traced — as the CPU runs it
    (native), as a GPU runs it (fused; see FusedAttention), or op by op (explicit; see
    ExplicitAttention).

    Raises TraceError naming the stage that failed (build, batch, forward, backward, optimizer).
    """
    problem.set_precision(precision)
    with _fake_mode():
        model, batch = _build(problem, mode, precision, batch_size)
        blocks = _blocks(problem, model)
        block_names = _block_names(model, blocks or [])
        opt = None
        if mode is Mode.TRAIN:
            opt = make_optimizer(optimizer, [p for p in model.parameters() if p.requires_grad], 1e-4, _CPU)
        keep = {StorageWeakRef(t.untyped_storage()) for t in (*model.parameters(), *model.buffers())}
        inputs = _BlockInputs(blocks or [])
        with ModuleTracker() as tracker:
            recorder = OpRecorder(tracker, block_names, keep, precision is Precision.TF32)
            calls = nn.modules.module.register_module_forward_pre_hook(recorder.module_called)
            try:
                with _ATTENTION[attention](), recorder, inputs:
                    _run_step(problem, model, batch, opt, recorder, _autocast(precision))
            finally:
                calls.remove()
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
        blocks=None if blocks is None else _block_traces(blocks, block_names, inputs, recorder),
        module_calls=dict(recorder.module_calls),
        trained_tensors=_trained_tensors(model, blocks or []) if mode is Mode.TRAIN else {},
    )


def _trained_tensors(model: nn.Module, blocks: Sequence[nn.Module]) -> dict[int | None, int]:
    """Parameter tensors that get a gradient, by the block holding them (None: outside blocks)."""
    owner = {id(p): i for i, block in enumerate(blocks) for p in block.parameters()}
    counts: dict[int | None, int] = {}
    for p in model.parameters():
        if p.requires_grad:
            block = owner.get(id(p))
            counts[block] = counts.get(block, 0) + 1
    return counts


def _build(problem: Problem, mode: Mode, precision: Precision, batch_size: int) -> tuple[nn.Module, Any]:
    """The model in the run's weight dtype, and a batch made for the meta device, then moved to the CPU."""
    model = _stage("build", problem.build_model)
    _convert(model, weight_dtype(precision))
    model.train(mode is Mode.TRAIN)
    batch = _stage("batch", lambda: problem.make_batch(batch_size, torch.device("meta"), torch.Generator()))
    return model, tree_map(lambda t: t.to(_CPU) if isinstance(t, torch.Tensor) else t, batch)


def _run_step(
    problem: Problem,
    model: nn.Module,
    batch: Any,
    opt: torch.optim.Optimizer | None,
    recorder: OpRecorder,
    autocast: Any,
) -> None:
    """Forward, and when training backward and the optimizer's update, each failure named by stage."""
    if opt is None:
        with torch.inference_mode(), autocast:
            _stage("forward", lambda: problem.loss(model, batch))
        return
    with torch.autograd.graph.saved_tensors_hooks(recorder.pack, lambda t: t), autocast:
        loss = _stage("forward", lambda: problem.loss(model, batch))
    _stage("backward", loss.backward)
    recorder.phase = OPTIMIZER
    with recorder.paused():  # the first step only makes the optimizer's state
        _stage("optimizer", opt.step)
    _stage("optimizer", opt.step)


def _block_traces(
    blocks: Sequence[nn.Module],
    block_names: list[tuple[str, str]],
    inputs: _BlockInputs,
    recorder: OpRecorder,
) -> tuple[BlockTrace, ...]:
    return tuple(
        BlockTrace(
            index=i,
            name=block_names[i][0],
            parameters=sum(p.numel() for p in block.parameters()),
            input_bytes=inputs.bytes[i],
            saved_bytes=recorder.saved_by_block.get(i, 0),
        )
        for i, block in enumerate(blocks)
    )


@contextlib.contextmanager
def _quiet_fake_tensors() -> Iterator[None]:
    """FakeTensorMode logs a traceback for every op that fails; the failure is reported once, as a
    TraceError, so its log is silenced meanwhile."""
    log = logging.getLogger("torch._subclasses.fake_tensor")
    saved = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(saved)


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
    frames = traceback.extract_tb(error.__traceback__)
    torch_dir = str(Path(torch.__file__).parent)
    flowrate_dir = str(Path(__file__).parents[1])
    outside = [f for f in frames if not f.filename.startswith((torch_dir, flowrate_dir))]
    chosen = outside[-1] if outside else (frames[-1] if frames else None)
    where = f" ({Path(chosen.filename).name}:{chosen.lineno})" if chosen else ""
    message = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {message}{where}"


class _AttentionMode(TorchFunctionMode):
    """Replaces each ``scaled_dot_product_attention`` call the subclass can trace (``attend``: its
    arguments by name, or None to keep the call as it is)."""

    _NAMES = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is not torch.nn.functional.scaled_dot_product_attention:
            return func(*args, **kwargs)
        call = {**dict(zip(self._NAMES, args, strict=False)), **kwargs}
        out = self.attend(call)
        return func(*args, **kwargs) if out is None else out

    def attend(self, call: dict[str, Any]) -> torch.Tensor | None:
        raise NotImplementedError


class FusedAttention(_AttentionMode):
    """Every ``scaled_dot_product_attention`` call as one fused kernel in its inputs' dtype.

    A GPU runs attention with a mask or dropout (BERT's, in training) as one fused kernel (the
    memory-efficient one) in the inputs' dtype. The CPU runs it through its math path instead,
    which upcasts 16-bit inputs to fp32 and materialises the score matrix in separate ops, so a
    trace on the CPU would price a fp16 GPU's attention as fp32 batched matmuls. Here the call
    becomes the CPU's fused kernel, whose shapes, FLOPs and backward match the GPU's (on fake
    tensors it never runs, so its own limits, such as no dropout, do not apply). Grouped-query
    calls and inputs without a head dimension, which that kernel cannot take, keep the math path.
    """

    def attend(self, call: dict[str, Any]) -> torch.Tensor | None:
        query, key, value = call["query"], call["key"], call["value"]
        if query.dim() != 4 or (call.get("enable_gqa") and query.shape[1] != key.shape[1]):
            return None
        mask = call.get("attn_mask")
        if mask is not None and mask.is_floating_point() and mask.dtype != query.dtype:
            mask = mask.to(query.dtype)
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            query,
            key,
            value,
            float(call.get("dropout_p", 0.0)),
            bool(call.get("is_causal", False)),
            attn_mask=mask,
            scale=call.get("scale"),
        )[0]


class ExplicitAttention(_AttentionMode):
    """Every ``scaled_dot_product_attention`` call op by op, in its inputs' dtype: the two batched
    matmuls, the scale, the mask's add, the softmax and the dropout, each writing and reading the
    score matrix, as implementations that predate the fused kernels compute it (NVIDIA's BERT
    ``modeling.py``). For pricing a published run of such an implementation: flowrate's own
    models call the fused kernel. Grouped-query calls keep the math path."""

    def attend(self, call: dict[str, Any]) -> torch.Tensor | None:
        query, key, value = call["query"], call["key"], call["value"]
        if call.get("enable_gqa") and query.shape[-3] != key.shape[-3]:
            return None
        with torch.autocast(query.device.type, enabled=False):
            scores = torch.matmul(query, key.transpose(-2, -1)) * (
                call.get("scale") or query.shape[-1] ** -0.5
            )
            mask = call.get("attn_mask")
            if call.get("is_causal"):
                mask = torch.ones(
                    query.shape[-2], key.shape[-2], dtype=torch.bool, device=query.device
                ).tril()
            if mask is not None and mask.dtype == torch.bool:
                scores = scores.masked_fill(~mask, float("-inf"))
            elif mask is not None:
                scores = scores + mask.to(query.dtype)
            probs = torch.softmax(scores, dim=-1)
            if float(call.get("dropout_p", 0.0)) > 0.0:  # one kernel, as a GPU's (the CPU's is three)
                probs = torch.ops.aten.native_dropout(probs, float(call["dropout_p"]), True)[0]
            return torch.matmul(probs, value)


_ATTENTION: dict[str, Callable[[], Any]] = {
    NATIVE: contextlib.nullcontext,
    FUSED: FusedAttention,
    EXPLICIT: ExplicitAttention,
}
ATTENTION = tuple(_ATTENTION)  # how a trace prices attention (trace_step)


def attention_on(device_type: str) -> str:
    """How a device runs flowrate's models' attention: the CPU's own way, or a GPU's fused kernel."""
    return NATIVE if device_type == "cpu" else FUSED


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
            tensors = tensors_in(args)
            if tensors and not self.bytes[index]:
                self.bytes[index] = tensor_bytes(tensors[0])

        return note
