"""Weight streaming computes resident's function: bf16 autocast-faithful (a weight travels in bf16
only where autocast would cast it), fp32 bit for bit, with or without resident blocks. The model
is written here: a learned positional table, LayerNorms and an LM head tied to its embedding."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from flowrate.config import Mode, OptimizerName, Precision
from flowrate.execution.precision import PrecisionPolicy
from flowrate.execution.resident import ResidentExecutor
from flowrate.execution.streaming import StreamingExecutor
from flowrate.problems.base import Batch, Problem

CPU = torch.device("cpu")
VOCAB, SEQ, HIDDEN, LAYERS = 96, 16, 32, 2


class Embeddings(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.token = nn.Embedding(VOCAB, HIDDEN)
        self.position = nn.Parameter(torch.randn(SEQ, HIDDEN) * 0.02)  # a learned positional table

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.token(ids) + self.position


class Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self.up = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.down = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


class Head(nn.Module):
    def __init__(self, embeddings: Embeddings) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self._tied = (embeddings,)  # the zoo's convention: the embedding stays registered once

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(x), self._tied[0].token.weight)


class TiedLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        embeddings = Embeddings()
        self.blocks = nn.ModuleList([embeddings, *(Layer() for _ in range(LAYERS)), Head(embeddings)])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            ids = block(ids)
        return ids


class TiedProblem(Problem):
    name = "tied-lm"

    def build_model(self) -> nn.Module:
        return TiedLM()

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        tokens = torch.randint(0, VOCAB, (batch_size, SEQ + 1), generator=generator, device=device)
        return tokens[:, :-1], tokens[:, 1:]

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        logits = model(batch[0])
        return F.cross_entropy(logits.float().reshape(-1, VOCAB), batch[1].reshape(-1))

    def parameter_count(self) -> int:
        return sum(p.numel() for p in TiedLM().parameters())

    def forward_flops_per_sample(self) -> int:
        return 1


def losses(precision: Precision, steps: int = 20, **streaming: object) -> tuple[list[float], list[float]]:
    """The same model and batches, resident and streamed, at lr 1e-2."""
    problem, policy = TiedProblem(), PrecisionPolicy(precision, CPU)
    torch.manual_seed(0)
    resident = ResidentExecutor(problem, problem.build_model(), policy, Mode.TRAIN, OptimizerName.ADAMW, 1e-2)
    torch.manual_seed(0)
    streamed = StreamingExecutor(
        problem,
        problem.build_model(),
        policy,
        Mode.TRAIN,
        OptimizerName.ADAMW,
        1e-2,
        **streaming,  # type: ignore[arg-type]
    )
    generator = torch.Generator().manual_seed(1)
    batches = [problem.make_batch(8, CPU, generator) for _ in range(4)]
    theirs = [float(resident.step(batches[i % 4])) for i in range(steps)]
    ours = [float(streamed.step(batches[i % 4])) for i in range(steps)]
    streamed.finish()
    return theirs, ours


def test_only_weights_autocast_casts_travel_in_bf16() -> None:
    problem = TiedProblem()
    streamed = StreamingExecutor(
        problem,
        problem.build_model(),
        PrecisionPolicy(Precision.BF16, CPU),
        Mode.TRAIN,
        OptimizerName.ADAMW,
        1e-2,
    )
    dtypes = {name: p.dtype for name, p in streamed.model.named_parameters()}
    streamed.finish()
    assert {n for n, d in dtypes.items() if d == torch.bfloat16} == {
        f"blocks.{i}.{m}.weight" for i in range(1, LAYERS + 1) for m in ("up", "down")
    }  # embedding and positional tables, norms and biases stay fp32, as autocast leaves them


@pytest.mark.parametrize("resident_blocks", [0, 2])
def test_bf16_streaming_computes_residents_losses(resident_blocks: int) -> None:
    theirs, ours = losses(Precision.BF16, resident_blocks=resident_blocks)
    assert theirs[-1] < theirs[0] * 0.9  # it trained, at a learning rate that moves the weights
    assert max(abs(a - b) / abs(a) for a, b in zip(theirs, ours, strict=True)) <= 1e-4


@pytest.mark.parametrize("resident_blocks", [0, 2])
def test_fp32_streaming_is_bit_identical(resident_blocks: int) -> None:
    theirs, ours = losses(Precision.FP32, steps=8, resident_blocks=resident_blocks)
    assert ours == theirs


def test_resident_blocks_are_never_released_and_use_the_device_optimizer() -> None:
    problem = TiedProblem()
    streamed = StreamingExecutor(
        problem,
        problem.build_model(),
        PrecisionPolicy(Precision.FP32, CPU),
        Mode.TRAIN,
        OptimizerName.ADAMW,
        1e-2,
        resident_blocks=2,
    )
    first, last = streamed.blocks[0], streamed.blocks[-1]
    assert [b.index for b in streamed.blocks if b.resident] == [0, LAYERS + 1]
    held: list[int] = []

    def probe(*_: object) -> None:
        held.append(min(p.untyped_storage().nbytes() for p in first.module.parameters()))

    for block in streamed.blocks[1:-1]:
        block.module.register_forward_hook(probe)  # after the executor's hook: the block is released
    batch = problem.make_batch(4, CPU, torch.Generator().manual_seed(0))
    for _ in range(3):
        streamed.step(batch)
        probe()
    assert held and min(held) > 0  # the resident block's weights never left
    assert not first.groups and not last.groups  # nothing of theirs streams
    assert isinstance(first.optimizer, torch.optim.AdamW)
    assert {id(p) for g in first.optimizer.param_groups for p in g["params"]} == {
        id(p) for p in first.module.parameters()
    }  # the device optimizer steps the model's own parameters
    report = streamed.report()
    assert report is not None and report.resident_blocks == [0, LAYERS + 1]
    streamed.finish()


def test_auto_keeps_the_end_blocks_that_fit_an_eighth_of_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    from flowrate.execution import streaming_blocks

    problem = TiedProblem()
    blocks = streaming_blocks.declare_blocks(problem, problem.build_model())
    embeddings = (VOCAB + SEQ) * HIDDEN * 16  # bytes resident: weight, gradient, two AdamW moments
    head = 2 * HIDDEN * 16
    cuda = torch.device("cuda")
    for device_bytes, chosen in [
        (8 * (embeddings + head), {0, LAYERS + 1}),  # both fit
        (8 * embeddings, {0}),  # the head would not fit beside the embeddings
        (8 * (embeddings - 1), set()),  # the head uses the embeddings' weight: it cannot go alone
    ]:
        monkeypatch.setattr(streaming_blocks, "_device_bytes", lambda device, n=device_bytes: n)
        assert streaming_blocks.choose_resident(blocks, None, cuda) == chosen
    assert streaming_blocks.choose_resident(blocks, None, CPU) == set()  # nothing to hide on a CPU
    assert streaming_blocks.choose_resident(blocks, 3, CPU) == {0, LAYERS + 1, 1}  # first, last, second
