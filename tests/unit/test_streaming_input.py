"""Models weight streaming cannot load as declared are refused in one line, before the first step
completes: blocks that miss a parameter, a block that runs twice in one forward, a parameter
registered in two blocks that are not adjacent and not declared tied."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from flowrate.config import Mode, OptimizerName, Precision
from flowrate.errors import ConfigError, FlowrateError
from flowrate.execution.precision import PrecisionPolicy
from flowrate.execution.streaming import StreamingExecutor
from flowrate.problems.base import Batch, Problem

CPU = torch.device("cpu")


class Chain(nn.Module):
    """Four Linear(4, 4) blocks; ``order`` says which run, ``extra`` is a parameter outside them."""

    def __init__(self, order: tuple[int, ...] = (0, 1, 2, 3), extra: bool = False) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(4)])
        self.order = order
        self.scale = nn.Parameter(torch.ones(4)) if extra else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for index in self.order:
            x = self.blocks[index](x)
        return x if self.scale is None else x * self.scale


class ChainProblem(Problem):
    name = "chain"

    def __init__(self, **settings: object) -> None:
        self.settings = settings
        self.tied: dict[int, list[nn.Parameter]] = {}

    def build_model(self) -> nn.Module:
        return Chain(**self.settings)  # type: ignore[arg-type]

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        return (torch.randn(batch_size, 4, generator=generator),)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        return model(batch[0]).square().mean()

    def parameter_count(self) -> int:
        return 80

    def forward_flops_per_sample(self) -> int:
        return 128

    def tied_parameters(self, model: nn.Module) -> dict[int, list[nn.Parameter]]:
        return self.tied


def streamed(problem: ChainProblem, model: nn.Module | None = None) -> StreamingExecutor:
    return StreamingExecutor(
        problem,
        model if model is not None else problem.build_model(),
        PrecisionPolicy(Precision.FP32, CPU),
        Mode.TRAIN,
        OptimizerName.ADAMW,
        1e-3,
    )


def test_a_parameter_outside_every_block_is_refused() -> None:
    with pytest.raises(
        FlowrateError, match=r"^1 parameter tensors of Chain are in none of its declared blocks"
    ):
        streamed(ChainProblem(extra=True))


def test_a_block_run_twice_in_one_forward_is_refused_at_the_first_step() -> None:
    problem = ChainProblem(order=(0, 1, 2, 1, 3))
    executor = streamed(problem)
    batch = problem.make_batch(2, CPU, torch.Generator().manual_seed(0))
    with pytest.raises(FlowrateError, match=r"^block 1 \(Linear\) ran twice in one forward"):
        executor.step(batch)
    executor.finish()


def test_a_block_declared_twice_is_refused() -> None:
    problem = ChainProblem()
    model = problem.build_model()
    model.blocks.append(model.blocks[0])  # type: ignore[operator]
    with pytest.raises(FlowrateError, match=r"^blocks 0 and 4 of Chain are the same module"):
        streamed(problem, model)


def test_a_parameter_shared_by_distant_blocks_must_be_declared_tied() -> None:
    problem = ChainProblem()
    model = problem.build_model()
    model.blocks[3].weight = model.blocks[0].weight  # type: ignore[index]
    with pytest.raises(FlowrateError, match=r"^parameter weight of block 3 is also registered in block 0"):
        streamed(problem, model)
    problem.tied = {3: [model.blocks[0].weight]}  # type: ignore[index, list-item]
    executor = streamed(problem, model)  # declared: block 3 uses block 0's weights
    assert executor.blocks[3].needs == [0]
    batch = problem.make_batch(2, CPU, torch.Generator().manual_seed(0))
    assert torch.isfinite(executor.step(batch))
    executor.finish()


def test_a_parameter_shared_by_adjacent_blocks_streams_with_its_owner() -> None:
    problem = ChainProblem()
    model = problem.build_model()
    model.blocks[2].weight = model.blocks[1].weight  # type: ignore[index]
    torch.manual_seed(0)
    executor = streamed(problem, model)
    assert executor.blocks[2].needs == [1]
    batch = problem.make_batch(2, CPU, torch.Generator().manual_seed(0))
    losses = [float(executor.step(batch)) for _ in range(3)]
    executor.finish()
    assert losses[-1] < losses[0]


def test_a_resident_block_cannot_use_a_streamed_blocks_weights() -> None:
    problem = ChainProblem()
    model = problem.build_model()
    problem.tied = {3: [model.blocks[1].weight]}  # type: ignore[index, list-item]
    with pytest.raises(
        ConfigError, match=r"^resident_blocks: block 3 stays resident but uses the weights of block 1"
    ):
        StreamingExecutor(
            problem,
            model,
            PrecisionPolicy(Precision.FP32, CPU),
            Mode.TRAIN,
            OptimizerName.ADAMW,
            1e-3,
            resident_blocks=2,
        )
