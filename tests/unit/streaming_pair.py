"""The equivalence tests' common harness: one problem trained resident and streamed, side by side."""

from __future__ import annotations

import torch

from flowrate.config import Mode, OptimizerName, Precision
from flowrate.execution.precision import PrecisionPolicy
from flowrate.execution.resident import ResidentExecutor
from flowrate.execution.streaming import StreamingExecutor
from flowrate.problems.base import Problem

CPU = torch.device("cpu")


def train_both(
    problem: Problem, precision: Precision, steps: int
) -> tuple[list[float], list[float], ResidentExecutor, StreamingExecutor]:
    """Both executors from the same seed over the same two alternating batches: their losses and
    the executors themselves (the caller reads their weights, then calls ``streamed.finish()``)."""
    policy = PrecisionPolicy(precision, CPU)
    torch.manual_seed(0)
    resident = ResidentExecutor(problem, problem.build_model(), policy, Mode.TRAIN, OptimizerName.ADAMW, 1e-3)
    torch.manual_seed(0)
    streamed = StreamingExecutor(
        problem, problem.build_model(), policy, Mode.TRAIN, OptimizerName.ADAMW, 1e-3
    )
    generator = torch.Generator().manual_seed(1)
    batches = [problem.make_batch(4, CPU, generator) for _ in range(2)]
    theirs = [float(resident.step(batches[i % 2])) for i in range(steps)]
    ours = [float(streamed.step(batches[i % 2])) for i in range(steps)]
    return theirs, ours, resident, streamed
