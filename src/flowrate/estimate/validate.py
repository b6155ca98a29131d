"""`flowrate validate`: every problem with a configuration, found in seconds, before it runs.

Checks, each reported on its own so one run lists them all: the options make a valid RunConfig
and name a problem shape that exists; the device exists and runs the precision (on a --target,
the peak table says whether it has the units); the model builds and one step — forward, and
backward and the optimizer's update for training — runs on the meta device (fake tensors: shapes
and dtypes, no data, so a shape mismatch fails here as it would on the device); and the memory
the chosen execution mode needs fits the device, and for streaming the host. A configuration that
does not fit says by how much and which batch size, precision or execution mode would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from flowrate.config import Execution, Mode, Precision, RunConfig
from flowrate.errors import ConfigError, FlowrateError
from flowrate.estimate.devices import (
    DeviceModel,
    EstimateUnavailable,
    local_device,
    target_device,
)
from flowrate.estimate.memory import (
    Fit,
    MemoryPlan,
    largest_batch,
    plan_memory,
    power_of_two_below,
    resident_need,
    streaming_need,
)
from flowrate.estimate.trace import NATIVE, StepTrace, TraceError, attention_on, trace_step
from flowrate.measure.device import local_capacity
from flowrate.problems.base import Problem

# What each trace stage failing means, in words.
_STAGES = {
    "build": "the model does not build",
    "batch": "the problem cannot make a batch",
    "forward": "the forward pass fails",
    "backward": "the backward pass fails",
    "optimizer": "the optimizer's update fails",
}


@dataclass(frozen=True)
class Finding:
    kind: str  # option, device, precision, build, batch, forward, backward, optimizer, memory
    message: str
    error: bool = True  # False: a warning (the check could not be completed)


@dataclass
class Validation:
    """What `flowrate validate` found, and what it checked."""

    findings: list[Finding] = field(default_factory=list)
    config: RunConfig | None = None
    problem: Problem | None = None
    device: str = ""  # the device checked against, in words
    host: str = "this machine"  # the host streaming's check is against, in words
    device_model: DeviceModel | None = None
    batch_size: int | None = None
    trace: StepTrace | None = None
    attention: str = NATIVE  # how the trace prices attention: as the device runs it
    plan: MemoryPlan | None = None

    @property
    def ok(self) -> bool:
        return not any(f.error for f in self.findings)

    def add(self, kind: str, message: str, error: bool = True) -> None:
        self.findings.append(Finding(kind, message, error))


def validate(
    fields: dict[str, Any],
    *,
    target: str | None = None,
    host_capacity: float | None = None,
    flag_names: dict[str, str] | None = None,
) -> Validation:
    """Check the run ``fields`` (RunConfig keyword arguments) describe; never raises for a problem
    it finds, only for an unknown --target (ConfigError listing the known devices)."""
    names = flag_names or {}
    result = Validation()
    device_model = target_device(target) if target is not None else None
    try:
        config = RunConfig(**fields)
    except ConfigError as mistake:
        result.add(
            "option", f"--{names.get(mistake.field, mistake.field).replace('_', '-')}: {mistake.message}"
        )
        return result
    result.config = config
    problem = _problem(config, result, names)
    device = _device(config, result, device_model)
    if problem is None:
        return result
    config = result.config = config.for_problem(problem.modes, problem.default_mode, problem.name)
    result.problem = problem
    if config.batch_size == "auto":
        result.batch_size = problem.default_batch_size
    else:
        result.batch_size = int(config.batch_size or problem.default_batch_size)
    on = result.device_model.device_type if result.device_model else device.type if device else "cpu"
    result.attention = attention_on(on)  # a GPU's fused attention keeps no score matrix for backward
    try:
        result.trace = trace_step(
            problem,
            mode=config.settled_mode,
            precision=config.precision,
            optimizer=config.optimizer,
            batch_size=result.batch_size,
            attention=result.attention,
        )
    except TraceError as failure:
        meaning = _STAGES.get(failure.stage, failure.stage)
        warning = "which the meta device cannot" in failure.detail
        result.add(failure.stage, f"{meaning}: {failure.detail}", error=not warning)
        return result
    capacity = device_model.memory_capacity if device_model is not None else None
    if capacity is None and device is not None:
        capacity = local_capacity(device)
    host = host_capacity if host_capacity is not None else host_available()
    if host_capacity is not None:
        result.host = "--host-memory"
    result.plan = plan_memory(result.trace, config.execution, capacity, host, config.recompute)
    _check_memory(result, config, problem)
    return result


def host_available() -> float | None:
    """Host RAM available now (psutil), what streaming's host-side state must fit in."""
    import psutil

    try:
        return float(psutil.virtual_memory().available)
    except (OSError, RuntimeError):
        return None


def _problem(config: RunConfig, result: Validation, names: dict[str, str]) -> Problem | None:
    from flowrate.problems.registry import get_problem

    try:
        problem = get_problem(config.problem, config.size, config.problem_options)
        config.for_problem(problem.modes, problem.default_mode, problem.name)
    except ConfigError as mistake:
        flag = names.get(mistake.field, mistake.field).replace("_", "-")
        result.add("option", f"--{flag}: {mistake.message}")
        return None
    except FlowrateError as failure:
        result.add("build", str(failure))
        return None
    return problem


def _device(config: RunConfig, result: Validation, model: DeviceModel | None) -> torch.device | None:
    """The device checked against (a --target's model, or this machine's), with precision checks."""
    from flowrate.execution.precision import check_supported
    from flowrate.measure.device import resolve_device

    if model is not None:
        result.device, result.device_model = model.name, model
        _check_target_precision(config, result, model)
        return None
    try:
        device = resolve_device(config.device)
    except ConfigError as mistake:
        result.add("device", f"--{mistake.field}: {mistake.message}")
        return None
    try:
        result.device_model = local_device(device)
        result.device = result.device_model.name
    except EstimateUnavailable:
        from flowrate.measure.env import device_name

        result.device = device_name(device)
    for check in (check_supported, _streamable if config.execution is Execution.STREAMING else None):
        if check is None:
            continue
        try:
            check(config.precision, device)
        except ConfigError as mistake:
            result.add("precision", f"--{mistake.field}: {mistake.message}")
    return device


def _streamable(precision: Precision, device: torch.device) -> None:
    from flowrate.execution.streaming import check_streamable

    check_streamable(precision, device)


def _check_target_precision(config: RunConfig, result: Validation, model: DeviceModel) -> None:
    from flowrate.measure.peaks import no_figure, precision_key

    key = precision_key(config.precision)
    if model.device_type == "cpu" and config.precision is Precision.TF32:
        result.add("precision", "--precision: tf32 is a CUDA tensor-core format; on a CPU use fp32 or bf16")
    elif key not in model.precisions():
        result.add("precision", f"--precision: {no_figure(key, model.name, list(model.precisions()))}")
    if config.execution is Execution.STREAMING:
        _streamable_on_target(config, result)


def _streamable_on_target(config: RunConfig, result: Validation) -> None:
    from flowrate.execution.streaming import check_streamable

    try:
        check_streamable(config.precision, torch.device("meta"))
    except ConfigError as mistake:
        result.add("precision", f"--{mistake.field}: {mistake.message}")


def _check_memory(result: Validation, config: RunConfig, problem: Problem) -> None:
    plan, trace = result.plan, result.trace
    assert plan is not None and trace is not None
    need = plan.needs[plan.chosen]
    if not need.available:
        result.add("memory", f"--execution {plan.chosen}: {need.reason}")
        return
    what = f"{plan.chosen} {'training' if config.settled_mode is Mode.TRAIN else 'inference'}"
    for fit in plan.fits:
        if fit.fits is not False:
            continue
        tries = _suggestions(config, problem, trace, fit, result.attention)
        advice = f": try {_either(tries)}" if tries else ": no batch size, precision or execution mode fits"
        if fit.where == "host":
            advice = ": use --optimizer sgd (4 bytes less per parameter), a smaller model, or a larger host"
        where = result.device if fit.where == "device" else result.host
        result.add(
            "memory",
            f"{what} {fit.describe(where)}{advice}",
        )


def _suggestions(
    config: RunConfig, problem: Problem, trace: StepTrace, fit: Fit, attention: str
) -> list[str]:
    """What would fit the device: a smaller batch, a 16-bit precision, streaming."""
    assert fit.capacity is not None
    capacity = fit.capacity
    tries = []
    need = (
        resident_need(trace)
        if config.execution is Execution.RESIDENT
        else streaming_need(trace, config.recompute)
    )
    batch = power_of_two_below(min(largest_batch(trace, need, capacity), trace.batch_size - 1))
    if batch >= 1:
        tries.append(f"--batch-size {batch}")
    for precision in _lighter_precisions(config):  # streaming computes in fp32 or bf16 only
        if config.execution is Execution.STREAMING and precision is Precision.PURE_BF16:
            continue
        lighter = _retrace(problem, config, trace.batch_size, precision, attention)
        if lighter is not None and _fits(lighter, config, capacity):
            tries.append(f"--precision {precision.value}")
            break
    if config.execution is Execution.RESIDENT and config.settled_mode is Mode.TRAIN:
        for recompute in (False, True):
            streamed = streaming_need(trace, recompute)
            if streamed.available and streamed.device_bytes <= capacity:
                tries.append("--execution streaming" + (" --recompute" if recompute else ""))
                break
    return tries


def _lighter_precisions(config: RunConfig) -> list[Precision]:
    if config.precision in (Precision.FP32, Precision.TF32):
        return [Precision.BF16, Precision.PURE_BF16]
    if config.precision in (Precision.BF16, Precision.FP16):
        return [Precision.PURE_BF16]
    return []


def _retrace(
    problem: Problem, config: RunConfig, batch_size: int, precision: Precision, attention: str
) -> StepTrace | None:
    try:
        return trace_step(
            problem,
            mode=config.settled_mode,
            precision=precision,
            optimizer=config.optimizer,
            batch_size=batch_size,
            attention=attention,
        )
    except FlowrateError:
        return None
    finally:
        problem.set_precision(config.precision)


def _fits(trace: StepTrace, config: RunConfig, capacity: float) -> bool:
    need = (
        resident_need(trace)
        if config.execution is Execution.RESIDENT
        else streaming_need(trace, config.recompute)
    )
    return need.device_bytes <= capacity


def _either(tries: list[str]) -> str:
    if len(tries) == 1:
        return tries[0]
    return ", ".join(tries[:-1]) + f", or {tries[-1]}"
