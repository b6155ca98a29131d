"""The compile report: what a configuration costs and how fast it should run, before it runs.

``build_report`` traces the step on the meta device and prices it on a device model; the report
is plain data (``to_dict`` for JSON; flowrate.cli.estimate_text renders it as compile_report.txt).
``run_estimate`` is the short form recorded beside every run's measurement.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from flowrate.config import Execution, FreedMemory, Mode, RunConfig
from flowrate.errors import FlowrateError
from flowrate.estimate.cost import StepEstimate, StreamingEstimate, estimate_step, estimate_streaming
from flowrate.estimate.devices import DeviceModel, EstimateUnavailable
from flowrate.estimate.memory import MemoryPlan, plan_memory
from flowrate.estimate.ops import BACKWARD, FORWARD
from flowrate.estimate.trace import StepTrace, attention_on, trace_step
from flowrate.problems.base import Problem
from flowrate.results.sections import Estimate

# The cost model's version, recorded with every estimate: bump it when predictions change.
# roofline-2: the framework's overhead terms (flowrate.estimate.overheads) beside the roofline.
COST_MODEL = "roofline-2"


@dataclass(frozen=True)
class BlockRow:
    index: int
    name: str
    parameters: int
    forward_flops: int
    backward_flops: int
    bytes: int
    activation_bytes: int
    seconds: float | None  # estimated forward + backward time (None without an estimate)
    # seconds per cost term (flowrate.estimate.cost.TERMS) and the largest of them
    terms: dict[str, float] | None = None
    dominant: str | None = None


@dataclass(frozen=True)
class CompileReport:
    configuration: dict[str, Any]
    parameters: int  # analytic (the problem's own count)
    parameters_traced: int  # counted on the meta-device model
    blocks: int | None
    forward_flops_per_sample: int  # analytic model FLOPs
    backward_flops_per_sample: int | None  # analytic, training only
    traced_forward_flops_per_sample: float  # what the kernels execute (causal attention: half)
    traced_backward_flops_per_sample: float
    bytes_per_step: int  # read + written by every kernel (roofline approximation)
    kernels_per_step: int
    activation_bytes: int  # saved for backward
    arithmetic_intensity: float | None  # FLOPs per byte over the whole step
    memory: dict[str, Any]
    block_rows: list[BlockRow]
    device: dict[str, Any]
    estimate: StepEstimate | None
    streaming: StreamingEstimate | None
    reasons: dict[str, str]  # why a section is empty: estimate, streaming

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["cost_model"] = COST_MODEL
        return data


def trace_for(
    config: RunConfig,
    problem: Problem,
    batch_size: int,
    device: DeviceModel | None = None,
    attention: str | None = None,
) -> StepTrace:
    """The step's trace, with attention as ``device`` runs it (fused on a GPU; see FusedAttention)
    unless ``attention`` (trace.ATTENTION) says otherwise."""
    return trace_step(
        problem,
        mode=config.settled_mode,
        precision=config.precision,
        optimizer=config.optimizer,
        batch_size=batch_size,
        attention=attention or attention_on(device.device_type if device is not None else "cpu"),
    )


def build_report(
    config: RunConfig,
    problem: Problem,
    device: DeviceModel | None,
    *,
    batch_size: int,
    host_capacity: float | None = None,
    device_capacity: float | None = None,
    unavailable: str | None = None,
    attention: str | None = None,
) -> CompileReport:
    """Trace the step and price it on ``device`` (None, with ``unavailable`` saying why: figures
    without an estimate); ``attention``: trace_for's."""
    trace = trace_for(config, problem, batch_size, device, attention)
    mode = config.settled_mode
    reasons: dict[str, str] = {}
    estimate = streaming = None
    if device is None:
        reasons["estimate"] = unavailable or "no device model"
    else:
        try:
            estimate = estimate_step(trace, device, problem.tokens_per_sample)
        except EstimateUnavailable as why:
            reasons["estimate"] = str(why)
    if estimate is not None and device is not None:
        try:
            streaming = estimate_streaming(trace, device, estimate, problem.tokens_per_sample)
        except EstimateUnavailable as why:
            reasons["streaming"] = str(why)
    capacity = (
        device_capacity if device_capacity is not None else (device.memory_capacity if device else None)
    )
    plan = plan_memory(trace, config.execution, capacity, host_capacity, config.recompute)
    flops = trace.flops()
    moved = trace.bytes()
    return CompileReport(
        configuration=_configuration(config, problem, batch_size),
        parameters=problem.parameter_count(),
        parameters_traced=trace.parameters,
        blocks=len(trace.blocks) if trace.blocks is not None else None,
        forward_flops_per_sample=problem.forward_flops_per_sample(),
        backward_flops_per_sample=(
            problem.train_flops_per_sample() - problem.forward_flops_per_sample()
            if mode is Mode.TRAIN
            else None
        ),
        traced_forward_flops_per_sample=trace.flops(FORWARD) / batch_size,
        traced_backward_flops_per_sample=trace.flops(BACKWARD) / batch_size,
        bytes_per_step=moved,
        kernels_per_step=trace.kernels(),
        activation_bytes=trace.saved_bytes,
        arithmetic_intensity=flops / moved if moved else None,
        memory=_memory(plan),
        block_rows=_block_rows(trace, estimate),
        device=_device(device, capacity),
        estimate=estimate,
        streaming=streaming,
        reasons=reasons,
    )


def _configuration(config: RunConfig, problem: Problem, batch_size: int) -> dict[str, Any]:
    return {
        "problem": problem.name,
        "size": problem.size,
        "mode": config.settled_mode.value,
        "batch_size": batch_size,
        "precision": config.precision.value,
        "optimizer": config.optimizer.value if config.settled_mode is Mode.TRAIN else None,
        "execution": config.execution.value,
        "recompute": config.recompute,
        "tokens_per_sample": problem.tokens_per_sample,
    }


def _memory(plan: MemoryPlan) -> dict[str, Any]:
    return {
        "chosen": plan.chosen,
        "needs": {name: asdict(need) for name, need in plan.needs.items()},
        "fits": [
            {"where": f.where, "need": f.need, "capacity": f.capacity, "fits": f.fits, "tight": f.tight}
            for f in plan.fits
        ],
    }


def _device(device: DeviceModel | None, capacity: float | None) -> dict[str, Any]:
    if device is None:
        return {"name": None, "memory_capacity": capacity}
    rates = {key: device.large_flop_rate(key) for key in device.precisions()}
    bandwidth = device.bandwidth_rate(float("inf"))
    return {
        "name": device.name,
        "type": device.device_type,
        "basis": device.basis,
        "source": device.source,
        "flops": rates,
        "memory_bandwidth": bandwidth,
        "best_bandwidth": max(rate for _, rate in device.bandwidth),
        "host_link_bandwidth": device.host_link_bandwidth,
        "launch_overhead_s": device.launch_overhead_s,
        "overheads": device.overheads.to_dict() if device.overheads is not None else None,
        "memory_capacity": capacity,
        "ridge_point": {key: rate / bandwidth for key, rate in rates.items()} if bandwidth else {},
    }


def _block_rows(trace: StepTrace, estimate: StepEstimate | None) -> list[BlockRow]:
    if trace.blocks is None:
        return []
    rows = []
    for block in trace.blocks:
        ops = [op for op in trace.ops if op.block == block.index]
        terms = estimate.block_terms[block.index] if estimate and estimate.block_terms else None
        rows.append(
            BlockRow(
                index=block.index,
                name=block.name,
                parameters=block.parameters,
                forward_flops=sum(op.flops for op in ops if op.phase == FORWARD),
                backward_flops=sum(op.flops for op in ops if op.phase == BACKWARD),
                bytes=sum(op.bytes for op in ops),
                activation_bytes=block.saved_bytes,
                seconds=estimate.block_s[block.index] if estimate and estimate.block_s else None,
                terms=terms,
                dominant=max(terms, key=lambda name: terms[name]) if terms else None,
            )
        )
    return rows


def run_estimate(
    config: RunConfig,
    problem: Problem,
    batch_size: int,
    device: torch.device,
    distributed: bool = False,
    learnable: bool = False,
) -> Estimate | None:
    """The estimate recorded beside a run's measurement: samples/s predicted for this configuration
    on this device, or None with the reason. Never raises for a problem it cannot trace. None for
    a `flowrate check`, whose throughput is not a benchmark.

    It runs after the measurement, so whatever goes wrong in the cost model becomes the reason
    and never costs the user the run they measured."""
    from flowrate.estimate.devices import local_device
    from flowrate.measure.env import device_name

    if learnable:
        return None
    base = Estimate(cost_model=COST_MODEL, device=device_name(device))
    if distributed:
        return dataclasses.replace(base, reason="data-parallel runs are not estimated")
    try:
        model = local_device(device)
        estimate = _estimate_section(config, problem, batch_size, model)
        return dataclasses.replace(estimate, cost_model=base.cost_model, device=base.device)
    except FlowrateError as why:
        return dataclasses.replace(base, reason=str(why))
    except Exception as error:  # a bug in the cost model must not lose a measured run
        return dataclasses.replace(base, reason=f"the cost model failed: {type(error).__name__}: {error}")


def _estimate_section(config: RunConfig, problem: Problem, batch_size: int, device: DeviceModel) -> Estimate:
    trace = trace_for(config, problem, batch_size, device)
    step = estimate_step(trace, device, problem.tokens_per_sample)
    section = Estimate(
        samples_per_sec=step.samples_per_sec,
        tokens_per_sec=step.tokens_per_sec,
        step_s=step.step_s,
        basis=step.basis,
        execution=config.execution.value,
    )
    if config.freed_memory is FreedMemory.RELEASE and device.device_type == "cpu":
        section = dataclasses.replace(
            section,
            note="priced with freed host memory kept (--freed-memory keep, as the calibration ran): "
            "this run released it (the C library's default), and the page faults of its fresh pages "
            "are not in the estimate",
        )
    if config.execution is Execution.STREAMING:
        streamed = estimate_streaming(trace, device, step, problem.tokens_per_sample)
        section = dataclasses.replace(
            section,
            samples_per_sec=streamed.samples_per_sec,
            tokens_per_sec=streamed.samples_per_sec * problem.tokens_per_sample
            if problem.tokens_per_sample
            else None,
            step_s=streamed.step_s,
            hidden_share=streamed.hidden_share,
        )
    return section


def report_for(
    config: RunConfig,
    problem: Problem,
    *,
    target: str | None,
    batch_size: int,
    host_capacity: float | None = None,
    attention: str | None = None,
) -> CompileReport:
    """The compile report on ``--target`` (a peak-table or calibrated device) or on the run's own
    device; without rates for it (a CPU never calibrated), the figures without an estimate.
    ``attention``: trace_for's."""
    from flowrate.estimate.devices import local_device, target_device
    from flowrate.estimate.validate import host_available
    from flowrate.measure.device import local_capacity, resolve_device

    host = host_capacity if host_capacity is not None else host_available()
    if target is not None:
        model = target_device(target)
        return build_report(
            config, problem, model, batch_size=batch_size, host_capacity=host, attention=attention
        )
    device = resolve_device(config.device)
    try:
        model = local_device(device)
    except EstimateUnavailable as why:
        return build_report(
            config,
            problem,
            None,
            batch_size=batch_size,
            host_capacity=host,
            device_capacity=local_capacity(device),
            unavailable=str(why),
            attention=attention,
        )
    return build_report(
        config, problem, model, batch_size=batch_size, host_capacity=host, attention=attention
    )


def save_report(report: CompileReport, lines: list[str], directory: Path) -> tuple[Path, Path]:
    """compile_report.txt and compile_report.json in ``directory``, each written atomically."""
    import json

    from flowrate.io import write_atomic

    text, data = directory / "compile_report.txt", directory / "compile_report.json"
    write_atomic(text, "\n".join(lines) + "\n")
    write_atomic(data, json.dumps(report.to_dict(), indent=2) + "\n")
    return text, data
