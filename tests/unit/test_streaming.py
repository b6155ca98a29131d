"""Weight streaming computes the resident training step, holds few blocks on the device, and
refuses what it cannot do. On the CPU host and device share memory, but the code path is the one
a GPU takes (copies, hooks, per-block host updates on a thread)."""

from __future__ import annotations

import functools
import itertools

import pytest
import torch
from torch import nn

from flowrate.config import Mode, OptimizerName, Precision, RunConfig
from flowrate.errors import ConfigError, FlowrateError, OutOfMemory
from flowrate.execution.factory import make_executor
from flowrate.execution.flat_params import BlockBuffers, FlatGroup
from flowrate.execution.host_memory import HostArena, check_host_memory, host_bytes_per_parameter
from flowrate.execution.host_optimizer import BlockOptimizer, BlockUpdater
from flowrate.execution.precision import PrecisionPolicy
from flowrate.execution.resident import ResidentExecutor, make_optimizer
from flowrate.execution.streaming import StreamingExecutor
from flowrate.harness.api import run_config
from flowrate.problems.base import Problem
from flowrate.problems.registry import get_problem

CPU = torch.device("cpu")
STREAMED = ["fc_mnist", "transformer", "resnet50", "bert-base"]
STEPS = 20


def pair(
    name: str,
    precision: Precision = Precision.FP32,
    mode: Mode = Mode.TRAIN,
    optimizer: OptimizerName = OptimizerName.ADAMW,
    **streaming: object,
) -> tuple[Problem, ResidentExecutor, StreamingExecutor]:
    """The same model (same seed) under both executors."""
    problem = get_problem(name, "debug")
    policy = PrecisionPolicy(precision, CPU)
    torch.manual_seed(0)
    resident_model = problem.build_model()
    torch.manual_seed(0)
    streamed_model = problem.build_model()
    clip = streaming.get("clip_grad_norm")
    resident = ResidentExecutor(
        problem,
        resident_model,
        policy,
        mode,
        optimizer,
        1e-3,
        clip_grad_norm=clip,  # type: ignore[arg-type]
    )
    streamed = StreamingExecutor(problem, streamed_model, policy, mode, optimizer, 1e-3, **streaming)  # type: ignore[arg-type]
    return problem, resident, streamed


def train_both(
    name: str, steps: int = STEPS, **kwargs: object
) -> tuple[list[float], list[float], dict[str, torch.Tensor], dict[str, torch.Tensor], StreamingExecutor]:
    problem, resident, streamed = pair(name, **kwargs)  # type: ignore[arg-type]
    generator = torch.Generator().manual_seed(1)
    batches = [problem.make_batch(4, CPU, generator) for _ in range(3)]
    ours, theirs = [], []
    for i in range(steps):
        theirs.append(float(resident.step(batches[i % 3])))
        ours.append(float(streamed.step(batches[i % 3])))
    with streamed.master_weights() as model:
        streamed_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    streamed.finish()
    resident_weights = {k: v.detach().clone() for k, v in resident.model.state_dict().items()}
    return theirs, ours, resident_weights, streamed_weights, streamed


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), 1e-12)


@pytest.mark.parametrize("name", STREAMED)
def test_streaming_computes_the_resident_step_in_fp32(name: str) -> None:
    theirs, ours, resident_weights, streamed_weights, _ = train_both(name)
    assert max(relative(a, b) for a, b in zip(theirs, ours, strict=True)) <= 1e-6
    assert theirs[-1] < theirs[0]  # it trained
    assert resident_weights.keys() == streamed_weights.keys()
    for key, expected in resident_weights.items():
        if expected.is_floating_point():
            scale = expected.abs().max().clamp_min(1e-12)
            assert ((streamed_weights[key] - expected).abs().max() / scale) <= 1e-6, key


@pytest.mark.parametrize("name", STREAMED)
def test_streaming_in_bf16_computes_residents_function(name: str) -> None:
    theirs, ours, *_ = train_both(name, precision=Precision.BF16)
    # streaming sends in bf16 exactly the weights autocast casts (rounded the same way) and keeps
    # the rest fp32: resident's function, up to the summation order of a tied weight's gradients
    assert max(relative(a, b) for a, b in zip(theirs, ours, strict=True)) <= 1e-4


@pytest.mark.parametrize("name", ["transformer", "resnet50"])
def test_recompute_and_clipping_still_compute_the_resident_step(name: str) -> None:
    theirs, ours, resident_weights, streamed_weights, streamed = train_both(
        name, recompute=True, clip_grad_norm=0.05
    )
    assert max(relative(a, b) for a, b in zip(theirs, ours, strict=True)) <= 1e-6
    for key, expected in resident_weights.items():
        if expected.is_floating_point():
            assert torch.allclose(streamed_weights[key], expected, rtol=1e-6, atol=1e-7), key
    assert streamed.report().recompute is True


def test_sgd_and_inference_match_too() -> None:
    theirs, ours, *_ = train_both("transformer", steps=6, optimizer=OptimizerName.SGD)
    assert max(relative(a, b) for a, b in zip(theirs, ours, strict=True)) <= 1e-6
    problem, resident, streamed = pair("resnet50", mode=Mode.INFER)
    batch = problem.make_batch(4, CPU, torch.Generator().manual_seed(3))
    assert float(streamed.step(batch)) == pytest.approx(float(resident.step(batch)), rel=1e-6)
    assert streamed.resident_bytes == 0


@pytest.mark.parametrize("name", STREAMED)
def test_the_device_holds_at_most_two_blocks_of_weights(name: str) -> None:
    problem, _, streamed = pair(name)
    sizes = [b.weight_bytes for b in streamed.blocks]
    two_blocks = max(a + b for a, b in itertools.pairwise(sizes)) if len(sizes) > 1 else sizes[0]
    two_blocks += max((sizes[j] for b in streamed.blocks for j in b.needs), default=0)  # a tied block's owner
    seen: list[int] = []
    for block in streamed.blocks:  # read the accounting while every block runs, forward and backward
        block.module.register_forward_hook(lambda *_: seen.append(streamed.resident_bytes))
    batch = problem.make_batch(4, CPU, torch.Generator().manual_seed(2))
    for _ in range(3):
        streamed.step(batch)
    assert streamed.resident_bytes == 0  # nothing stays between steps
    assert 0 < max(seen) <= two_blocks
    assert streamed.peak_resident_bytes <= two_blocks
    assert streamed.peak_resident_bytes < sum(sizes) or len(sizes) <= 2
    report = streamed.report()
    assert report.device_weight_bytes_peak == streamed.peak_resident_bytes
    assert report.largest_block_bytes == max(sizes)
    streamed.finish()


def test_the_tied_embedding_travels_with_the_head() -> None:
    _, _, streamed = pair("transformer")
    head, embeddings = streamed.blocks[-1], streamed.blocks[0]
    token = embeddings.module.token.weight  # type: ignore[union-attr]
    assert any(p is token for p in head.tied) and not any(p is token for p in head.owned)
    assert head.needs == [0] and any(p is token for p in embeddings.owned)
    streamed.finish()


def test_the_host_optimizer_matches_torch_adamw_on_the_same_gradients() -> None:
    """Per-block flat updates in backward order on the updater's thread == one torch AdamW."""
    torch.manual_seed(0)
    shapes = [[(64, 32), (32,)], [(16, 64)]]
    reference = [nn.Parameter(torch.randn(*shape)) for block in shapes for shape in block]
    torch_adamw = torch.optim.AdamW(reference, lr=1e-3, weight_decay=0.01, foreach=False)
    groups, start = [], 0
    for block in shapes:
        params = [nn.Parameter(p.detach().clone()) for p in reference[start : start + len(block)]]
        start += len(block)
        group = FlatGroup(params, torch.float32, True, state_buffers=2)
        arena = HostArena()
        buffers = BlockBuffers([group], arena, CPU)
        arena.allocate(pin=False)
        buffers.bind(arena)
        groups.append(group)
    make = functools.partial(make_optimizer, OptimizerName.ADAMW, lr=1e-3, device=CPU)
    optimizers = [BlockOptimizer([g], make, OptimizerName.ADAMW) for g in groups]
    updater = BlockUpdater()
    for _ in range(25):
        grads = [torch.randn_like(p) for p in reference]
        for p, g in zip(reference, grads, strict=True):
            p.grad = g.clone()
        torch_adamw.step()
        flat = [torch.cat([g.reshape(-1) for g in grads[:2]]), grads[2].reshape(-1)]
        for index in reversed(range(len(groups))):  # backward order, as streaming submits them
            assert groups[index].staging is not None
            groups[index].staging.copy_(flat[index])
            updater.submit(index, optimizers[index].step)
        updater.wait_all()
    updater.close()
    ours = [v for g in groups for v in g.master_views()]
    for mine, theirs in zip(ours, reference, strict=True):
        assert torch.allclose(mine, theirs, rtol=1e-6, atol=1e-7)


class NoBlocks(Problem):
    name = "noblocks"

    def build_model(self) -> nn.Module:
        return nn.Sequential(nn.Linear(4, 4))

    def make_batch(self, batch_size, device, generator):  # type: ignore[no-untyped-def]
        return torch.randn(batch_size, 4, generator=generator)

    def loss(self, model, batch):  # type: ignore[no-untyped-def]
        return model(batch).square().mean()

    def parameter_count(self) -> int:
        return 20

    def forward_flops_per_sample(self) -> int:
        return 32


def test_a_model_without_blocks_is_told_how_to_declare_them() -> None:
    problem = NoBlocks()
    with pytest.raises(FlowrateError, match=r"self.blocks = nn.ModuleList\(\[...\]\)"):
        StreamingExecutor(
            problem,
            problem.build_model(),
            PrecisionPolicy(Precision.FP32, CPU),
            Mode.TRAIN,
            OptimizerName.ADAMW,
            1e-3,
        )


def test_host_memory_is_checked_before_anything_is_allocated(monkeypatch: pytest.MonkeyPatch) -> None:
    per = host_bytes_per_parameter(Mode.TRAIN, Precision.BF16, OptimizerName.ADAMW)
    assert per == 4 + 8 + 4 + 2 + 2
    assert host_bytes_per_parameter(Mode.TRAIN, Precision.FP32, OptimizerName.SGD) == 4 + 4 + 4 + 4
    assert host_bytes_per_parameter(Mode.INFER, Precision.BF16, OptimizerName.ADAMW) == 6
    held = r"needs 18.6 GiB of host memory for 1,000,000,000 parameters .* but 954 MiB is available"
    with pytest.raises(OutOfMemory, match=held):
        check_host_memory(1_000_000_000, 20, available=10**9)
    assert check_host_memory(1000, 20, available=10**9) == 20_000

    from flowrate.problems import base

    built = []
    monkeypatch.setattr(base.Problem, "build_model", lambda self: built.append(1))
    monkeypatch.setattr("psutil.virtual_memory", type("Memory", (), {"available": 1000}))
    with pytest.raises(OutOfMemory, match=r"needs [\d.]+ MiB of host memory .* but 1000 B is"):
        run_config(RunConfig(problem="transformer", size="debug", execution="streaming", steps=1))
    assert not built  # refused before the model was built


def test_a_failed_pinned_allocation_falls_back_to_pageable_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(StreamingExecutor, "_pins_host_memory", lambda self: True)
    real_empty = torch.empty

    def refuse(*args: object, pin_memory: bool = False, **kwargs: object) -> torch.Tensor:
        if pin_memory:
            raise RuntimeError("cudaHostAlloc failed: out of memory")
        return real_empty(*args, **kwargs)  # type: ignore[call-overload, no-any-return]

    monkeypatch.setattr(torch, "empty", refuse)
    problem, resident, streamed = pair("fc_mnist")
    monkeypatch.undo()
    assert streamed.pinned is False and not any(b.arena.pinned for b in streamed.blocks)
    assert streamed.warnings == [
        "pinned host memory could not be allocated (cudaHostAlloc failed: out of memory); streaming falls "
        "back to pageable memory for that block, whose copies are slower and not asynchronous (3 of 3 blocks)"
    ]
    batch = problem.make_batch(4, CPU, torch.Generator().manual_seed(0))
    assert float(streamed.step(batch)) == pytest.approx(float(resident.step(batch)), rel=1e-6)
    streamed.finish()


@pytest.mark.parametrize("precision", [Precision.FP16, Precision.PURE_BF16])
def test_precisions_streaming_cannot_run_are_refused(precision: Precision) -> None:
    with pytest.raises(ConfigError, match="streaming keeps fp32 master weights"):
        run_config(
            RunConfig(problem="fc_mnist", size="debug", execution="streaming", precision=precision, steps=1)
        )


def test_options_that_need_streaming_or_cuda_say_so() -> None:
    with pytest.raises(ConfigError, match="recompute: applies to --execution streaming only"):
        RunConfig(recompute=True)
    with pytest.raises(ConfigError, match="device_memory_limit: applies to CUDA devices"):
        run_config(
            RunConfig(problem="fc_mnist", size="debug", device="cpu", device_memory_limit_gib=1, steps=1)
        )


def test_gradients_are_reduced_once_per_block_per_step_before_the_update() -> None:
    calls: list[int] = []

    def average_with_an_identical_rank(flat: torch.Tensor) -> None:
        calls.append(flat.numel())
        flat.add_(flat.clone()).div_(2)  # what all_reduce(AVG) gives when both ranks agree

    problem, resident, streamed = pair("transformer", reduce_gradients=average_with_an_identical_rank)
    batch = problem.make_batch(4, CPU, torch.Generator().manual_seed(5))
    for _ in range(3):
        assert float(streamed.step(batch)) == pytest.approx(float(resident.step(batch)), rel=1e-6)
    streamed.finish()
    per_block = [sum(p.numel() for p in b.owned if p.requires_grad) for b in streamed.blocks]
    assert sorted(calls) == sorted(per_block * 3)  # one collective per block per step, whole blocks


def test_one_factory_builds_either_executor_and_both_keep_the_protocol() -> None:
    """make_executor builds what the config names; callers use the Executor protocol only."""
    problem = get_problem("fc_mnist", "debug")
    batch = problem.make_batch(4, CPU, torch.Generator().manual_seed(0))
    policy = PrecisionPolicy(Precision.FP32, CPU)
    losses = {}
    for execution in ("resident", "streaming"):
        config = RunConfig(problem="fc_mnist", size="debug", mode="train", execution=execution)
        torch.manual_seed(0)
        executor = make_executor(config, problem, problem.build_model(), policy)
        assert executor.warnings == []
        losses[execution] = [float(executor.step(batch)) for _ in range(3)]
        with executor.checkpoint_state() as (model, optimizer):
            saved = {k: v.clone() for k, v in model.state_dict().items()}
            kinds = [type(o) for o in optimizer] if isinstance(optimizer, list) else [type(optimizer)]
        assert set(kinds) == {torch.optim.AdamW} and saved
        executor.finish()
        report = executor.report(3)
        assert (report is None) == (execution == "resident")
    assert losses["streaming"] == pytest.approx(losses["resident"], rel=1e-6)
    assert report is not None and report.blocks == 3 and report.steps == 3


def test_a_users_optimizer_streams_as_per_block_optimizers_of_its_kind() -> None:
    problem = get_problem("fc_mnist", "debug")
    model = problem.build_model()
    users = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.8, nesterov=True)
    config = RunConfig(problem="fc_mnist", size="debug", mode="train", execution="streaming")
    executor = make_executor(config, problem, model, PrecisionPolicy(Precision.FP32, CPU), optimizer=users)
    with executor.checkpoint_state() as (_, optimizers):
        assert isinstance(optimizers, list) and len(optimizers) == 3
        assert all(type(o) is torch.optim.SGD for o in optimizers)
        assert {(o.defaults["lr"], o.defaults["momentum"], o.defaults["nesterov"]) for o in optimizers} == {
            (0.05, 0.8, True)
        }
    executor.finish()


def test_a_resident_inference_update_is_the_detached_loss() -> None:
    problem = get_problem("fc_mnist", "debug")
    config = RunConfig(problem="fc_mnist", size="debug", mode="infer")
    executor = make_executor(config, problem, problem.build_model(), PrecisionPolicy(Precision.FP32, CPU))
    loss = torch.tensor(2.5, requires_grad=True) * 1
    executor.begin_step()
    assert executor.update(loss).requires_grad is False and float(executor.update(loss)) == 2.5
