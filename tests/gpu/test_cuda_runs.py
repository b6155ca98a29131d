"""Real-GPU checks. They run with `pytest -m gpu` on a machine with CUDA (a lent GPU)."""

from __future__ import annotations

import math

import pytest
import torch

import flowrate
from flowrate.measure.device import resolve_device
from flowrate.measure.peaks import peak_for
from flowrate.results.sections import BatchSizeTry

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16", "pure-bf16"])
@pytest.mark.parametrize("mode", ["train", "infer"])
def test_debug_transformer_on_cuda(mode: str, precision: str) -> None:
    result = flowrate.benchmark(
        "transformer", size="debug", mode=mode, precision=precision, device="cuda", steps=6, preheat_steps=2
    )
    assert result.environment.device_type == "cuda"
    assert result.environment.device_name
    assert all(math.isfinite(v) for v in result.losses)


def test_auto_device_is_cuda() -> None:
    assert resolve_device("auto").type == "cuda"


def test_batch_size_auto_finds_a_fitting_size_on_cuda() -> None:
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
    search = result.batch_size_search
    assert search[0] == BatchSizeTry(1 << 22, fits=False)
    # halving from the largest: every size tried fails but the last, the one the run used
    assert [s.batch_size for s in search] == [(1 << 22) >> i for i in range(len(search))]
    assert [s.fits for s in search] == [False] * (len(search) - 1) + [True]
    assert result.batch_size == search[-1].batch_size < 1 << 22


def test_gpt2_bf16_training_throughput_is_recorded() -> None:
    result = flowrate.benchmark(
        "gpt2", batch_size=16, precision="bf16", device="cuda", duration_s=5.0, preheat_steps=5
    )
    s = result.summary
    assert s.tokens_per_sec == pytest.approx(s.samples_per_sec * 1024)
    flops_per_sample = result.problem.model_flops_per_sample
    assert s.model_flops_per_sec == pytest.approx(s.samples_per_sec * flops_per_sample)
    name = result.environment.device_name
    if peak_for(name, "bf16").entry is None:
        pytest.skip(f"no datasheet peak for {name!r}: MFU is empty there, by design")
    # MFU against the datasheet peak: a floor two thirds of what batch 16 measured eagerly (an H100
    # 0.178 on 2026-11-24, an H200 0.19 on 2026-11-28), and the ceiling nothing passes
    assert result.flops.mfu == pytest.approx(s.model_flops_per_sec / result.flops.peak_flops)
    assert 0.12 <= result.flops.mfu <= 1.0


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_cuda_runs_in_a_fresh_process_forked_from_the_server_or_spawned(method: str) -> None:
    # the server imports torch (flowrate.campaigns.process.fork_preload) and must leave the driver alone:
    # a CUDA driver initialised before a fork fails in the child; two runs, as a sweep's points
    from flowrate.campaigns.process.child import run_in_fresh_process
    from flowrate.config import RunConfig

    config = RunConfig(problem="transformer", size="debug", device="cuda", steps=4, preheat_steps=1)
    for _ in range(2):
        outcome = run_in_fresh_process(config, start_method=method)
        assert outcome.failure is None, outcome.message
        assert outcome.result is not None and outcome.result.environment.device_type == "cuda"


TINY_CUDA = dict(size="debug", steps=4, preheat_steps=1, sample_every=2)


def test_device_memory_limit_caps_the_run_and_is_lifted_after() -> None:
    before = torch.cuda.get_per_process_memory_fraction(0)
    total = torch.cuda.get_device_properties(0).total_memory
    during: list[float] = []
    flowrate.benchmark(
        "transformer",
        device="cuda:0",
        device_memory_limit_gib=1.0,
        on_interval=lambda _: during.append(torch.cuda.get_per_process_memory_fraction(0)),
        **TINY_CUDA,
    )
    assert during and all(f == pytest.approx(2**30 / total) for f in during)
    # a later run in this process is not capped, nor sized by the stale cap (issue 40.6)
    assert torch.cuda.get_per_process_memory_fraction(0) == before


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs: cuda:1 must exist")
def test_a_run_on_cuda_1_makes_it_current_while_it_runs() -> None:
    torch.cuda.set_device(0)
    during: list[int] = []
    result = flowrate.benchmark(
        "transformer",
        device="cuda:1",
        on_interval=lambda _: during.append(torch.cuda.current_device()),
        **TINY_CUDA,
    )
    # argument-less events and synchronize() act on the run's GPU, not on cuda:0 (issue 40.8)
    assert during and set(during) == {1}
    assert result.environment.device is not None and result.environment.device.index == 1
    assert torch.cuda.current_device() == 0  # put back after
