"""Every zoo problem's debug size trains and infers in every precision the CPU supports."""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch

import flowrate
from flowrate.config import Precision
from flowrate.errors import ConfigError
from flowrate.execution.precision import supported_precisions
from flowrate.problems import kernels
from flowrate.problems.registry import FAMILIES

CPU_PRECISIONS = [p.value for p in supported_precisions(torch.device("cpu"))]
# kernels run forward only; tests/unit/test_kernels.py runs their debug sizes
MODELS = sorted(set(FAMILIES) - {family.name for family in kernels.FAMILIES})


def test_the_cpu_supports_what_we_expect() -> None:
    int8 = ["int8-weights", "int8-dynamic"] if importlib.util.find_spec("torchao") else []
    assert ["fp32", "bf16", "fp16", "pure-bf16", *int8] == CPU_PRECISIONS


@pytest.mark.parametrize("precision", CPU_PRECISIONS)
@pytest.mark.parametrize("mode", ["train", "infer"])
@pytest.mark.parametrize("family", MODELS)
def test_debug_size_runs(family: str, mode: str, precision: str) -> None:
    if mode == "train" and Precision(precision).inference_only:
        with pytest.raises(ConfigError, match="cannot train"):
            flowrate.benchmark(family, size="debug", mode=mode, precision=precision, device="cpu")
        return
    result = flowrate.benchmark(
        family, size="debug", mode=mode, precision=precision, steps=3, preheat_steps=1, device="cpu"
    )
    s = result.summary
    assert s.timed_steps == 3 and s.timed_samples == 3 * result.batch_size
    assert len(result.losses) == 3 and all(math.isfinite(v) for v in result.losses)
    assert s.samples_per_sec == pytest.approx(s.timed_samples / s.timed_duration_s)  # GlobalRate
    assert result.problem.parameters == result.problem.parameters_built
    assert result.config.precision == precision


def test_training_lowers_the_loss_on_a_fixed_batch() -> None:
    """A sanity check that the resident executor really trains: one repeated batch, many steps."""
    problem = flowrate.get_problem("fc_mnist", "debug")
    result = flowrate.benchmark(problem, steps=30, preheat_steps=0, learning_rate=1e-2, batch_size=8)
    # BATCH_POOL alternates two batches; with lr 1e-2 AdamW memorises both quickly
    assert result.losses[-1] < 0.5 * result.losses[0]
