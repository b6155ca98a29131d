"""The roofline cost model: a step's time from its ops and a device's achievable rates.

Each op of the traced step (flowrate.estimate.trace) takes

    time = max(FLOPs / achieved FLOP/s, bytes / achieved bandwidth) + launch overhead

where the achieved rates are the device model's (flowrate.estimate.devices), views and metadata
ops cost nothing, and ops run one after another (eager PyTorch on one stream). The step's time is
the sum; samples/s = batch size / step time. On a CPU the step's tensors are priced on pages already
mapped, as under `--freed-memory keep` (flowrate.measure.freed_memory), the policy calibration
runs under: the first-touch page faults glibc's default adds to every large allocation are not a
term, and an estimate for a CPU run that released freed memory says so in its note.
Which rate prices an op's work:

- matmuls, convolutions (3x3 stride-1 apart: Winograd) and attention, forward and backward: the
  FLOP/s of that class measured at the op's FLOPs, and no more than a GEMM as thin as the op's
  thinnest dimension (a 4-row matmul never reaches the peak however many FLOPs it has);
- elementwise kernels a calibration timed (GELU, softmax, normalisation, pooling, …): the larger
  of their elements over the measured elements/s and their bytes over the bandwidth;
- the fused optimizer: parameters over the measured update rate (its traffic included);
- everything else: bytes over the bandwidth measured for copies of that size (in cache when small);
- in training, an op's bytes at no more than the bandwidth of copies as large as the activations
  the step saves: they stay allocated from the forward to the backward, so every op's tensors
  lie among them, and once they outgrow a cache each op streams its bytes from the next level
  (ResNet-50 at batch 2 saves 172 MB: its BatchNorm, ReLU and residual kernels run from memory);
- the framework's time, where the device's calibration has overhead terms
  (flowrate.estimate.overheads): each op (views and metadata included) pays the dispatch of its
  class; training adds autograd's cost per node (each forward op on a tensor that requires
  grad, and each trained parameter tensor's AccumulateGrad) and the step's fixed cost; every
  nn.Module call costs its own; and the optimizer's step replaces its ops' roofline with
  a + b·k + c·bytes over its k tensors and their bytes; dispatch, autograd, module calls and
  the step's fixed cost come at the calibration's working-set factor for the step's bytes per
  kernel (flowrate.estimate.reference);
- without overhead terms (a datasheet GPU, a hand-made model), one launch overhead per kernel
  by mode, which then holds the framework's work as well as the launch itself.

The step's time is the sum of its terms (StepEstimate.terms): compute and memory (each op's
larger roofline time), dispatch (or launch), autograd, modules, optimizer and step.

On a GPU the host and the device work at once: a call returns once its kernel is queued, and the
kernel starts when the device is free and the host has queued it. So the host's time (each op's
dispatch or launch, and autograd's and the modules' time, spread over their block's ops) runs on
one clock and the device's work on another (host_exposed_share); the step waits for the later,
and the host terms count only the share the device's work does not hide. A model of large
kernels is the device's time; one of many small kernels the host's. The optimizer's and the
step's fixed time stay outside that overlap. (The serial sum above is a CPU's: there the same
cores dispatch and compute.)

A device known only from its datasheet (no calibration) has one rate per precision and one
bandwidth, each at DEFAULT_EFFICIENCY of the peak, and no elementwise or optimizer rates.

Weight streaming adds the host link: each block's weights are copied to the device in the
compute precision before its forward and again before its backward, and its gradients are copied
back, while the device computes the block before (the copy of block i+1 overlaps the compute of
block i), and the host optimizer updates each block as its gradients arrive. A block's phase
therefore takes the longest of its compute, its copies (each direction on its own) and its
host update; the copy is hidden where compute covers it. The copy of a block is fully hidden when
the tokens per weight load reach T = F·c / (2·B) (MEASUREMENT.md's F/B for bf16, c = 2 bytes):
F the achieved FLOP/s, B the achievable host-link bandwidth.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from flowrate.config import Mode
from flowrate.estimate.devices import DeviceModel, EstimateUnavailable
from flowrate.estimate.ops import BACKWARD, FORWARD, OPTIMIZER, Op
from flowrate.estimate.reference import bytes_per_kernel
from flowrate.estimate.trace import StepTrace

# Parameters per second a host optimizer updates: DeepSpeed's CPU Adam, 11.6 B parameters in
# 8.2 s on a server CPU (MEASUREMENT.md). Used where the host's own rate is not measured.
HOST_OPTIMIZER_PARAMS_PER_S = 1.4e9


# Fused optimizer kernels -> the optimizer whose measured update rate prices them.
_OPTIMIZERS = {"_fused_adamw_": "adamw", "_fused_adam_": "adamw", "_fused_sgd_": "sgd"}


@dataclass(frozen=True)
class OpCost:
    compute_s: float  # FLOPs / achieved FLOP/s
    memory_s: float  # bytes / achieved bandwidth
    overhead_s: float  # launch overhead

    @property
    def seconds(self) -> float:
        return max(self.compute_s, self.memory_s) + self.overhead_s


def op_cost(op: Op, device: DeviceModel, mode: str = "train", live_bytes: int = 0) -> OpCost:
    """The roofline time of one op on ``device`` in a step of ``mode`` (train or infer), with its
    dispatch (a device with overhead terms) or launch overhead (one without); ``live_bytes``: what
    the step keeps allocated around the op (training: its saved activations), whose size sets
    the bandwidth its bytes move at where that is larger than the op's own."""
    overheads = device.overheads
    if overheads is not None and op.phase == OPTIMIZER:
        return OpCost(0.0, 0.0, 0.0)  # the optimizer's term prices its whole step
    if not op.kernel:
        return OpCost(0.0, 0.0, overheads.dispatch(op.dispatch) if overheads is not None else 0.0)
    overhead = device.launch_overhead_s[mode] if overheads is None else overheads.dispatch(op.dispatch)
    optimizer = _OPTIMIZERS.get(op.key, "")
    if op.kind == "optimizer" and optimizer in device.optimizer:
        # the measured update rate already includes its memory traffic
        return OpCost(op.elements / device.optimizer[optimizer], 0.0, overhead)
    compute = 0.0
    if op.flops:
        compute = op.flops / device.flop_rate(op.precision, op.flops, op.kind, op.thin)
    elif op.kind == "elementwise" and op.key in device.elementwise:
        compute = op.elements / device.elementwise[op.key]
    memory = op.bytes / device.bandwidth_rate(max(op.bytes, live_bytes)) if op.bytes else 0.0
    return OpCost(compute, memory, overhead)


TERMS = ("compute", "memory", "dispatch", "autograd", "modules", "optimizer", "step")


def framework_terms(trace: StepTrace, device: DeviceModel) -> dict[int | None, dict[str, float]]:
    """Autograd's nodes and the module calls, by block (None: outside every block), and the
    optimizer's and the step's fixed time outside every block; none on a device without overhead
    terms. The optimizer's step is its fit (a + b·k + c·bytes, fitted on updates small enough to
    stay in cache) or, where longer, its parameters at the calibration's rate for a fused update
    of 16 Mi parameters, from memory: a ResNet-50's 100 MB of weights update at the second."""
    overheads = device.overheads
    if overheads is None:
        return {}
    train = trace.mode is Mode.TRAIN
    nodes: dict[int | None, int] = dict(trace.trained_tensors) if train else {}
    for op in trace.ops:
        if op.node:
            nodes[op.block] = nodes.get(op.block, 0) + 1
    blocks = set(nodes) | set(trace.module_calls) | {None}
    terms = {
        block: {
            "autograd": nodes.get(block, 0) * overheads.autograd_node_s,
            "modules": trace.module_calls.get(block, 0) * overheads.module_s,
        }
        for block in blocks
    }
    if train:
        cost = overheads.optimizer.get(trace.optimizer.value)
        tensors = sum(trace.trained_tensors.values())
        weights = trace.parameters * trace.weight_element_size
        rate = device.optimizer.get(trace.optimizer.value)
        streamed = trace.parameters / rate * trace.weight_element_size / 4 if rate else 0.0
        terms[None]["optimizer"] = max(cost.seconds(tensors, weights), streamed) if cost is not None else 0.0
    terms[None]["step"] = overheads.step_s.get(trace.mode.value, 0.0)
    return terms


@dataclass(frozen=True)
class StepEstimate:
    """The cost model's account of one step on one device."""

    device: str
    basis: str
    batch_size: int
    step_s: float
    samples_per_sec: float
    tokens_per_sec: float | None
    kernels: int
    compute_bound_s: float  # time in ops whose FLOPs outlast their bytes
    memory_bound_s: float  # time in ops whose bytes outlast their FLOPs
    overhead_s: float  # every term but compute and memory: the framework's time
    phase_s: dict[str, float]  # forward, backward, optimizer
    block_s: list[float] | None  # forward + backward per block (None: no blocks)
    # seconds per term (TERMS; dispatch is "launch" without overhead terms), summing to step_s
    terms: dict[str, float] = field(default_factory=dict)
    block_terms: list[dict[str, float]] | None = None  # the terms of each block


def estimate_step(
    trace: StepTrace, device: DeviceModel, tokens_per_sample: int | None = None
) -> StepEstimate:
    """Time one step of ``trace`` on ``device``: each op's roofline and dispatch, and the
    framework's terms (see the module's docstring)."""
    device, costs, extra, exposed = _priced(trace, device)
    launch = "dispatch" if device.overheads is not None else "launch"
    by_block: dict[int | None, dict[str, float]] = {}
    phases = {phase: 0.0 for phase in (FORWARD, BACKWARD, OPTIMIZER)}
    for op, cost in zip(trace.ops, costs, strict=True):
        terms = by_block.setdefault(op.block, {})
        bound = "compute" if cost.compute_s >= cost.memory_s and cost.compute_s > 0 else "memory"
        work = max(cost.compute_s, cost.memory_s)
        terms[bound] = terms.get(bound, 0.0) + work
        terms[launch] = terms.get(launch, 0.0) + exposed * cost.overhead_s
        phases[op.phase] += work + exposed * cost.overhead_s
    for block, terms in extra.items():
        for name, seconds in terms.items():
            shown = exposed * seconds if name in _HOST_TERMS else seconds
            by_block.setdefault(block, {})[name] = by_block.get(block, {}).get(name, 0.0) + shown
        phases[FORWARD] += exposed * terms.get("modules", 0.0)
        phases[BACKWARD if trace.mode is Mode.TRAIN else FORWARD] += terms.get("step", 0.0)
        phases[BACKWARD] += exposed * terms.get("autograd", 0.0)
        phases[OPTIMIZER] += terms.get("optimizer", 0.0)
    totals = {name: sum(t.get(name, 0.0) for t in by_block.values()) for name in (*TERMS, "launch")}
    totals = {name: seconds for name, seconds in totals.items() if seconds > 0}
    step = sum(totals.values())
    if step <= 0:
        raise EstimateUnavailable("the step runs no kernels: nothing to estimate")
    block_terms = None
    if trace.blocks is not None:
        block_terms = [by_block.get(i, {}) for i in range(len(trace.blocks))]
    samples = trace.batch_size / step
    return StepEstimate(
        device=device.name,
        basis=device.basis,
        batch_size=trace.batch_size,
        step_s=step,
        samples_per_sec=samples,
        tokens_per_sec=samples * tokens_per_sample if tokens_per_sample else None,
        kernels=trace.kernels(),
        compute_bound_s=totals.get("compute", 0.0),
        memory_bound_s=totals.get("memory", 0.0),
        overhead_s=step - totals.get("compute", 0.0) - totals.get("memory", 0.0),
        phase_s=phases,
        block_s=[sum(t.values()) for t in block_terms] if block_terms is not None else None,
        terms=totals,
        block_terms=block_terms,
    )


# The framework's terms that run on the host beside the device's work (module docstring).
_HOST_TERMS = ("autograd", "modules")


def _priced(
    trace: StepTrace, device: DeviceModel
) -> tuple[DeviceModel, list[OpCost], dict[int | None, dict[str, float]], float]:
    """The device at the step's working set, each op's cost, the framework's terms by block, and
    the share of the host's time the step waits for (all of it on a CPU: the module's docstring)."""
    device = device.at_working_set(bytes_per_kernel(trace))
    extra = framework_terms(trace, device)
    costs = [op_cost(op, device, trace.mode.value, trace.saved_bytes) for op in trace.ops]
    exposed = host_exposed_share(trace.ops, costs, extra) if device.device_type == "cuda" else 1.0
    return device, costs, extra, exposed


def op_seconds(trace: StepTrace, device: DeviceModel) -> tuple[list[float], float]:
    """Each op's seconds in estimate_step's account of the step (its roofline time and the share
    of its dispatch or launch the step waits for), and the framework's terms that belong to no op
    (autograd, modules, optimizer, step) as it adds them: together they are its step_s."""
    _, costs, extra, exposed = _priced(trace, device)
    per_op = [max(c.compute_s, c.memory_s) + exposed * c.overhead_s for c in costs]
    framework = sum(
        exposed * seconds if name in _HOST_TERMS else seconds
        for terms in extra.values()
        for name, seconds in terms.items()
    )
    return per_op, framework


def host_exposed_share(
    ops: Sequence[Op], costs: Sequence[OpCost], extra: dict[int | None, dict[str, float]]
) -> float:
    """On a device that runs while its host queues work: the share of the host's time in the ops
    (their dispatch or launch, and autograd's and the modules' time spread evenly over their
    block's ops) that the device's work does not hide. The host queues each op after the one
    before; the device starts an op's work once it is queued and the work before it is done."""
    per_block: dict[int | None, int] = {}
    for op in ops:
        per_block[op.block] = per_block.get(op.block, 0) + 1
    spread = {
        block: sum(extra.get(block, {}).get(name, 0.0) for name in _HOST_TERMS) / count
        for block, count in per_block.items()
    }
    # a block with host terms and no op of its own (none in practice) queues first
    host = host_total = sum(
        seconds
        for block, terms in extra.items()
        if block not in per_block
        for name, seconds in terms.items()
        if name in _HOST_TERMS
    )
    device = work_total = 0.0
    for op, cost in zip(ops, costs, strict=True):
        queued = cost.overhead_s + spread[op.block]
        host += queued
        host_total += queued
        work = max(cost.compute_s, cost.memory_s)
        if work > 0:
            device = max(device, host) + work
            work_total += work
    if host_total <= 0:
        return 0.0
    return max(0.0, max(host, device) - work_total) / host_total


@dataclass(frozen=True)
class StreamingEstimate:
    """Weight streaming's step on ``device``: where the host link slows it, and by how much."""

    host_link_bandwidth: float  # achievable bytes/s per direction
    host_link_basis: str
    copy_s: float  # weights in (forward and backward) and gradients out, per step
    compute_s: float  # the device's compute over the blocks, per step
    hidden_share: float  # share of copy time that compute covers
    step_s: float
    samples_per_sec: float
    resident_samples_per_sec: float  # the same step with every weight resident
    min_tokens_per_load: float  # T = F·c / (2·B): tokens per weight load for copies to hide
    tokens_per_load: int | None  # tokens each block processes per load (batch x tokens per sample)
    batch_to_hide: int | None  # batch size at which compute covers every block's copy
    notes: list[str] = field(default_factory=list)


def estimate_streaming(
    trace: StepTrace,
    device: DeviceModel,
    step: StepEstimate,
    tokens_per_sample: int | None = None,
    compute_element_size: int | None = None,
) -> StreamingEstimate:
    """The streamed step: per block, the longest of compute, copies and host update, per phase."""
    if trace.blocks is None:
        raise EstimateUnavailable("the problem declares no blocks, so it cannot be streamed")
    link, basis = device.host_link_bandwidth, "host link"
    if device.device_type == "cpu":
        link, basis = device.bandwidth_rate(math.inf), "memory copies (the CPU is its own host)"
    if not link:
        raise EstimateUnavailable(f"{device.name} has no host-link bandwidth in the peak table")
    element = compute_element_size or trace.compute_element_size
    forward, backward, outside = _block_seconds(trace, device, len(trace.blocks))
    train = trace.mode is Mode.TRAIN
    notes: list[str] = []
    if train:
        notes.append(
            f"host optimizer at {HOST_OPTIMIZER_PARAMS_PER_S / 1e9:.2g} B parameters/s (DeepSpeed's CPU "
            "Adam; not measured here)"
        )
    total = outside
    copies = hidden = compute = 0.0
    for block, f, b in zip(trace.blocks, forward, backward, strict=True):
        copy = block.parameters * element / link
        phases = [(f, copy, 0.0)]
        if train:
            # weights in and gradients out use the link's two directions at once
            phases.append((b, copy, block.parameters / HOST_OPTIMIZER_PARAMS_PER_S))
        for work, copy_s, update_s in phases:
            total += max(work, copy_s, update_s)
            copies += copy_s
            hidden += min(work, copy_s)
            compute += work
    forward_total = sum(forward)
    copy_forward = sum(block.parameters * element / link for block in trace.blocks)
    batch_to_hide = math.ceil(step.batch_size * copy_forward / forward_total) if forward_total > 0 else None
    return StreamingEstimate(
        host_link_bandwidth=link,
        host_link_basis=basis,
        copy_s=copies,
        compute_s=compute,
        hidden_share=hidden / copies if copies > 0 else 1.0,
        step_s=total,
        samples_per_sec=step.batch_size / total,
        resident_samples_per_sec=step.samples_per_sec,
        min_tokens_per_load=device.large_flop_rate("bf16" if element == 2 else "fp32") * element / (2 * link),
        tokens_per_load=step.batch_size * tokens_per_sample if tokens_per_sample else None,
        batch_to_hide=batch_to_hide,
        notes=notes,
    )


def _block_seconds(
    trace: StepTrace, device: DeviceModel, blocks: int
) -> tuple[list[float], list[float], float]:
    """Forward and backward seconds per block, and the seconds outside every block; the device's
    optimizer update is left out, as the host optimizer replaces it."""
    device = device.at_working_set(bytes_per_kernel(trace))
    forward = [0.0] * blocks
    backward = [0.0] * blocks
    outside = 0.0
    for op in trace.ops:
        seconds = op_cost(op, device, trace.mode.value, trace.saved_bytes).seconds
        if op.phase == OPTIMIZER:
            continue
        if op.block is None:
            outside += seconds
        elif op.phase == FORWARD:
            forward[op.block] += seconds
        else:
            backward[op.block] += seconds
    extra = framework_terms(trace, device)
    for block, terms in extra.items():
        if block is None:
            outside += terms["autograd"] + terms["modules"] + terms.get("step", 0.0)
        else:
            forward[block] += terms["modules"]
            backward[block] += terms["autograd"]
    return forward, backward, outside
