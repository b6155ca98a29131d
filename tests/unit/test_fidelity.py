"""The fidelity check: its summary of a loss curve, the zoo's learnable tasks, and real convergence."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
import torch

from flowrate.config import Mode, RunConfig
from flowrate.errors import ConfigError, FlowrateError
from flowrate.harness.fidelity import (
    THROUGHPUT_WARNING,
    comparable,
    has_learnable_task,
    run_check,
    summarize_fidelity,
)
from flowrate.problems.base import Problem
from flowrate.problems.encoder import IGNORE
from flowrate.problems.registry import FAMILIES, get_problem
from flowrate.results.schema import Result
from flowrate.results.sections import Fidelity

CPU = torch.device("cpu")
# The families that train (kernels are forward-only and have no task to learn).
MODEL_FAMILIES = [name for name in FAMILIES if Mode.TRAIN in get_problem(name, "debug").modes]


# --- summarize_fidelity on exact curves ---------------------------------------------------------


def test_default_window_is_a_tenth_of_the_steps() -> None:
    f = summarize_fidelity([float(x) for x in range(10, 0, -1)])  # 10, 9, … 1
    assert f["steps"] == 10 and f["window"] == 1
    assert (f["initial_loss"], f["final_loss"], f["min_loss"]) == (10.0, 1.0, 1.0)
    assert f["relative_drop"] == pytest.approx(0.9)
    assert f["drop_standard_error"] == 0.0  # one-step windows have no scatter to measure
    assert f["fell"] is True
    assert f["target_loss"] is None and f["steps_to_target"] is None and f["task"] is None

    f = summarize_fidelity([5.0] * 10 + [1.0] * 15)  # 25 steps: window 2
    assert f["window"] == 2
    assert (f["initial_loss"], f["final_loss"]) == (5.0, 1.0)


def test_windows_and_steps_to_target() -> None:
    losses = [4.0, 4.0, 4.0, 3.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    f = summarize_fidelity(losses, window=3, target_loss=2.0)
    assert (f["initial_loss"], f["final_loss"], f["min_loss"]) == (4.0, 1.0, 1.0)
    # running means of 3 ending at steps 3, 4, 5, 6: 4, 3.67, 3, 2 -> the target is met at step 6
    assert f["steps_to_target"] == 6
    assert summarize_fidelity(losses, window=3, target_loss=4.0)["steps_to_target"] == 3
    assert summarize_fidelity(losses, window=3, target_loss=0.5)["steps_to_target"] is None
    assert summarize_fidelity(losses, window=1, target_loss=3.0)["steps_to_target"] == 4
    # a window longer than the curve is the whole curve
    whole = summarize_fidelity([3.0, 1.0], window=5)
    assert whole["window"] == 2 and whole["initial_loss"] == whole["final_loss"] == 2.0


def test_fell_needs_a_fall_beyond_the_noise_and_beyond_a_drift() -> None:
    assert summarize_fidelity([2.0] * 20)["fell"] is False
    # 10% lower, but the steps scatter by ±1: the difference is within 3 standard errors
    noisy = summarize_fidelity([3.0, 1.0] * 5 + [2.8, 0.8] * 5)
    assert noisy["window"] == 2 and noisy["final_loss"] == pytest.approx(1.8)
    assert noisy["drop_standard_error"] == pytest.approx(math.sqrt(2.0))
    assert noisy["fell"] is False
    # noiseless but only 2.5% lower: a drift, not a fall
    assert summarize_fidelity([2.0] * 10 + [1.95] * 10)["fell"] is False
    # the same 10% fall with little scatter is a fall
    assert summarize_fidelity([2.01, 1.99] * 5 + [1.81, 1.79] * 5)["fell"] is True
    # a rising loss never fell
    assert summarize_fidelity([1.0] * 10 + [2.0] * 10)["fell"] is False


def test_summarize_refuses_empty_curves_and_bad_windows() -> None:
    with pytest.raises(FlowrateError, match="no losses"):
        summarize_fidelity([])
    with pytest.raises(ConfigError, match="window"):
        summarize_fidelity([1.0], window=0)


def _record(initial: float, final: float) -> Fidelity:
    return Fidelity(initial_loss=initial, final_loss=final)


def test_comparable_is_relative_to_how_far_the_loss_fell() -> None:
    assert comparable(_record(2.3, 0.1), _record(2.3, 0.3))  # 0.2 apart, 10% of 2.2 is 0.22
    assert not comparable(_record(2.3, 0.1), _record(2.3, 0.4))
    assert comparable(_record(2.3, 0.1), _record(2.3, 0.4), tolerance=0.2)
    assert not comparable(_record(2.0, 2.0), _record(2.0, 2.0))  # neither trained


# --- the zoo's learnable tasks ------------------------------------------------------------------


def test_every_zoo_model_has_a_learnable_task() -> None:
    assert MODEL_FAMILIES == ["fc_mnist", "transformer", "bert-base", "roberta-large", "resnet50"]
    for name in MODEL_FAMILIES:
        assert has_learnable_task(get_problem(name, "debug"))


def _batches(problem: Problem, seed: int) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    size = problem.default_batch_size
    synthetic = problem.make_batch(size, CPU, torch.Generator(CPU).manual_seed(seed))
    learnable = problem.learnable_batch(size, CPU, torch.Generator(CPU).manual_seed(seed))
    return synthetic, learnable


@pytest.mark.parametrize("family", MODEL_FAMILIES)
def test_learnable_batch_has_make_batch_shapes_and_dtypes(family: str) -> None:
    problem = get_problem(family, "debug")
    synthetic, learnable = _batches(problem, seed=3)
    assert len(learnable) == len(synthetic)
    for ours, theirs in zip(learnable, synthetic, strict=True):
        assert (ours.shape, ours.dtype, ours.device) == (theirs.shape, theirs.dtype, theirs.device)


@pytest.mark.parametrize("family", MODEL_FAMILIES)
def test_learnable_batch_is_deterministic_for_a_seed(family: str) -> None:
    problem = get_problem(family, "debug")
    first = _batches(problem, seed=7)[1]
    again = _batches(problem, seed=7)[1]
    other = _batches(problem, seed=8)[1]
    for a, b in zip(first, again, strict=True):
        assert torch.equal(a, b)
    assert any(not torch.equal(a, b) for a, b in zip(first, other, strict=True))


@pytest.mark.parametrize("family", MODEL_FAMILIES)
def test_learnable_labels_stay_inside_the_model(family: str) -> None:
    problem = get_problem(family, "debug")
    settings = problem.describe()
    classes = int(settings.get("vocab_size", settings.get("classes", 0)))
    inputs, labels = problem.learnable_batch(64, CPU, torch.Generator(CPU).manual_seed(0))
    predicted = labels[labels != IGNORE]
    assert predicted.numel() > 0
    assert int(predicted.min()) >= 0 and int(predicted.max()) < classes
    if not inputs.is_floating_point():  # token ids
        assert int(inputs.min()) >= 0 and int(inputs.max()) < classes


def test_the_language_is_a_bigram_walk_then_its_copy() -> None:
    problem = get_problem("transformer", "debug")  # seq_len 32: 33 tokens, 17 walked, 16 copied
    ids, targets = problem.learnable_batch(8, CPU, torch.Generator(CPU).manual_seed(0))
    tokens = torch.cat([ids[:, :1], targets], dim=1)  # (B, 33)
    assert torch.equal(tokens[:, 17:], tokens[:, :16])
    assert torch.equal(ids[:, 1:], targets[:, :-1])
    assert int(tokens.max()) < 64  # the task's vocabulary
    # every token is followed by one of 2 fixed successors
    successors: dict[int, set[int]] = {}
    for row in tokens[:, :17].tolist():
        for a, b in itertools.pairwise(row):
            successors.setdefault(a, set()).add(b)
    assert max(len(s) for s in successors.values()) <= 2


def test_classes_cluster_around_fixed_prototypes() -> None:
    problem = get_problem("fc_mnist", "debug")
    images, labels = problem.learnable_batch(512, CPU, torch.Generator(CPU).manual_seed(0))
    means = torch.stack([images[labels == k].mean(0) for k in range(10)])  # (10, 784)
    nearest = torch.cdist(images, means).argmin(dim=1)
    assert (nearest == labels).float().mean() > 0.99  # the nearest class mean is the label


# --- the check: the loss really falls on the CPU, in fp32 and bf16 alike -------------------------


def _check(problem: str, precision: str, **options: Any) -> Result:
    config = RunConfig(problem=problem, size="debug", device="cpu", precision=precision, **options)
    return run_check(config)


@pytest.fixture(scope="module")
def fc_mnist() -> dict[str, Result]:
    # 60 steps of 16: lr 1e-3 takes the debug MLP from ≈ ln 10 to ≈ 0.03 (lr 1e-4 only to ≈ 2).
    options = {"steps": 60, "preheat_steps": 0, "batch_size": 16, "learning_rate": 1e-3}
    return {p: _check("fc_mnist", p, **options) for p in ("fp32", "bf16")}


@pytest.fixture(scope="module")
def transformer() -> dict[str, Result]:
    # 150 steps of 8 x 32 tokens at lr 3e-3: the bigrams are learnt (≈ 1.0, floor 0.35 once the
    # model also copies, which takes ~800 steps); bf16 autocast on the CPU is the slow part.
    options = {"steps": 150, "preheat_steps": 0, "batch_size": 8, "learning_rate": 3e-3}
    return {p: _check("transformer", p, **options) for p in ("fp32", "bf16")}


def _fidelity(result: Result) -> Fidelity:
    assert result.fidelity is not None
    return result.fidelity


def test_fc_mnist_loss_really_falls(fc_mnist: dict[str, Result]) -> None:
    f = _fidelity(fc_mnist["fp32"])
    assert f.steps == len(fc_mnist["fp32"].losses) == 60
    assert f.initial_loss > 1.8  # near ln 10 ≈ 2.30 at the start
    assert f.final_loss < 0.3
    assert f.fell is True
    assert f.task.startswith("Class clusters")


def test_transformer_loss_really_falls(transformer: dict[str, Result]) -> None:
    f = _fidelity(transformer["fp32"])
    assert f.initial_loss > 4.0  # ln 512 ≈ 6.24 at the start
    assert f.final_loss < 1.5  # below ln 64 ≈ 4.16: the bigram structure is learnt
    assert f.fell is True
    assert "bigram" in f.task


@pytest.mark.parametrize("name", ["fc_mnist", "transformer"])
def test_bf16_reaches_a_loss_comparable_to_fp32(
    name: str, fc_mnist: dict[str, Result], transformer: dict[str, Result]
) -> None:
    results = {"fc_mnist": fc_mnist, "transformer": transformer}[name]
    fp32, bf16 = _fidelity(results["fp32"]), _fidelity(results["bf16"])
    assert bf16.fell is True
    assert comparable(fp32, bf16), (fp32.final_loss, bf16.final_loss)


def test_a_check_result_says_it_is_no_benchmark(fc_mnist: dict[str, Result]) -> None:
    result = fc_mnist["fp32"]
    assert result.warnings[0] == THROUGHPUT_WARNING
    assert _fidelity(result).preheat_steps == 0
    assert Result.from_json(result.to_json()).fidelity == result.fidelity


def test_a_check_needs_a_learnable_task_and_training() -> None:
    class NoTask(Problem):  # the abstract methods are never reached
        name = "no_task"

        def build_model(self) -> torch.nn.Module:
            raise NotImplementedError

        def make_batch(
            self, batch_size: int, device: torch.device, generator: torch.Generator
        ) -> tuple[torch.Tensor, ...]:
            raise NotImplementedError

        def loss(self, model: torch.nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
            raise NotImplementedError

        def parameter_count(self) -> int:
            return 0

        def forward_flops_per_sample(self) -> int:
            return 0

    with pytest.raises(ConfigError, match="no learnable task") as caught:
        run_check(RunConfig(device="cpu"), NoTask())
    assert caught.value.field == "problem"
    with pytest.raises(ConfigError, match="forward-only") as caught:
        run_check(RunConfig(problem="gemm", size="debug", device="cpu"))
    assert caught.value.field == "problem"
    with pytest.raises(ConfigError, match="trains") as caught:
        run_check(RunConfig(problem="fc_mnist", size="debug", device="cpu", mode="infer"))
    assert caught.value.field == "mode"
    with pytest.raises(ConfigError, match="finite"):
        run_check(RunConfig(problem="fc_mnist", size="debug", device="cpu"), target_loss=math.nan)
