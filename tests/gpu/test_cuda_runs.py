"""Real-GPU checks. They run with `pytest -m gpu` on a machine with CUDA (a lent GPU)."""

from __future__ import annotations

import math

import pytest
import torch

import flowrate
from flowrate.measure.device import resolve_device

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16", "pure-bf16"])
@pytest.mark.parametrize("mode", ["train", "infer"])
def test_debug_transformer_on_cuda(mode: str, precision: str) -> None:
    result = flowrate.benchmark(
        "transformer", size="debug", mode=mode, precision=precision, device="cuda", steps=6, preheat_steps=2
    )
    assert result.environment["device"]["type"] == "cuda"
    assert result.environment["device"]["name"]
    assert all(math.isfinite(v) for v in result.losses)


def test_auto_device_is_cuda() -> None:
    assert resolve_device("auto").type == "cuda"


def test_batch_size_auto_finds_a_fitting_size_on_cuda() -> None:
    free, _total = torch.cuda.mem_get_info()
    # a batch of 2**22 debug sequences of 1024 tokens needs far more than any GPU has
    result = flowrate.benchmark(
        "transformer",
        size="debug",
        problem_options={"seq_len": 1024},
        batch_size="auto",
        max_batch_size=1 << 22,
        device="cuda",
        steps=2,
        preheat_steps=1,
    )
    assert result.batch_size_search[0] == {"batch_size": 1 << 22, "fits": False}
    assert result.batch_size_search[-1]["fits"] is True
    assert result.batch_size < 1 << 22
    assert free > 0


def test_gpt2_bf16_training_throughput_is_recorded() -> None:
    result = flowrate.benchmark(
        "gpt2", batch_size=8, precision="bf16", device="cuda", duration_s=5.0, preheat_steps=5
    )
    assert result.summary.samples_per_sec > 0
    assert result.summary.tokens_per_sec == pytest.approx(result.summary.samples_per_sec * 1024)
