"""One place that builds an Executor from a RunConfig: for `flowrate run` and for a session alike."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch
from torch import nn

from flowrate.config import Execution, RunConfig
from flowrate.execution.base import Executor
from flowrate.execution.distributed import DataParallel
from flowrate.execution.host_memory import check_host_memory, host_bytes_per_parameter
from flowrate.execution.precision import PrecisionPolicy, check_supported
from flowrate.execution.quantize import apply_format
from flowrate.execution.replicated import unwrap
from flowrate.execution.resident import ResidentExecutor
from flowrate.execution.streaming import StreamingExecutor, check_streamable
from flowrate.measure.device import resolve_device
from flowrate.problems.base import Problem


def run_device(config: RunConfig, dp: DataParallel | None) -> torch.device:
    """This process's device (a data-parallel rank's own), refused before any work if the config's
    precision or execution mode cannot run there."""
    device = dp.device if dp is not None else resolve_device(config.device)
    check_supported(config.precision, device)
    if config.execution is Execution.STREAMING:
        check_streamable(config.precision, device)
    return device


def build_device(config: RunConfig, problem: Problem, device: torch.device) -> torch.device:
    """Where to build the model: streaming builds it in host memory (refused first, with the
    numbers, if its host-side state would not fit: it may well not fit on the device), resident
    on the device itself."""
    if config.execution is not Execution.STREAMING:
        return device
    per_parameter = host_bytes_per_parameter(config.settled_mode, config.precision, config.optimizer)
    check_host_memory(problem.parameter_count(), per_parameter)
    return torch.device("cpu")


def make_executor(
    config: RunConfig,
    problem: Problem,
    model: nn.Module,
    policy: PrecisionPolicy,
    *,
    optimizer: torch.optim.Optimizer | None = None,
    dp: DataParallel | None = None,
) -> Executor:
    """The executor ``config.execution`` names, running ``model`` under ``policy``.

    ``optimizer``: the user's own (a session) instead of the config's; resident steps it as it is,
    streaming builds one of its class and hyper-parameters per block over the host masters.
    ``dp``: this rank of a data-parallel run. Streaming averages its host gradients with the other
    ranks'; resident training runs the model in DistributedDataParallel (a session wraps the
    user's model itself, before the executor exists, and hands it over wrapped).
    """
    mode = config.settled_mode
    if config.execution is Execution.STREAMING:
        return StreamingExecutor(
            problem,
            model,
            policy,
            mode,
            config.optimizer if optimizer is None else same_kind(optimizer),
            config.learning_rate,
            recompute=config.recompute,
            clip_grad_norm=config.clip_grad_norm,
            reduce_gradients=dp.average_device_gradients if dp is not None else None,
            resident_blocks=config.resident_blocks,
        )
    resident = ResidentExecutor(
        problem,
        model,
        policy,
        mode,
        config.optimizer if optimizer is None else optimizer,
        config.learning_rate,
        clip_grad_norm=config.clip_grad_norm,
        compile=config.compile,
    )
    # after the executor moved the model to its device: the formats' tensors are made there
    resident.model = apply_format(resident.model, policy.precision)
    if dp is not None and resident.optimizer is not None and unwrap(resident.model) is resident.model:
        resident.model = dp.wrap(resident.model)
    return resident


def same_kind(optimizer: torch.optim.Optimizer) -> Callable[[list[nn.Parameter]], torch.optim.Optimizer]:
    """Makes optimizers of ``optimizer``'s class with its hyper-parameters (those its constructor
    takes: ``defaults`` may hold more, as AdamW's holds Adam's decoupled_weight_decay)."""
    kind = type(optimizer)
    accepted = inspect.signature(kind).parameters
    defaults = {k: v for k, v in optimizer.defaults.items() if k in accepted}

    def make(params: list[nn.Parameter]) -> torch.optim.Optimizer:
        return kind(params, **defaults)

    return make
