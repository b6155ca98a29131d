"""Kernel problems on a real GPU. They run with `pytest -m gpu` on a machine with CUDA (a lent GPU)."""

from __future__ import annotations

import math

import pytest
import torch

import flowrate
from flowrate.config import Precision
from flowrate.measure.peaks import PeakLookup, peak_for
from flowrate.problems.registry import get_problem

pytestmark = pytest.mark.gpu

ON_DEVICE = ["gemm", "bmm", "conv2d", "attention", "layernorm", "copy"]
HOST_LINK = ["h2d", "d2h", "duplex"]
FAST = {"steps": 4, "preheat_steps": 2, "device": "cuda"}
# The share of its datasheet peak a large kernel must reach: well under what a healthy device gives
# (an H100 SXM runs a 4096³ bf16 GEMM at about 750–800 of its 989 TFLOP/s), far over what a wrong
# precision, a host-bound loop or an idle device would.
FLOOR = 0.5


def datasheet(result: flowrate.Result, precision: str) -> PeakLookup:
    """The peak table's entry for the device the run used; a device without one cannot be judged."""
    name = result.environment.device_name
    peak = peak_for(name, precision)
    if peak.entry is None:
        pytest.skip(f"no datasheet peak for {name!r} to compare with: {peak.reason}")
    return peak


@pytest.mark.parametrize("precision", ["bf16", "pure-bf16", "fp16", "fp32", "tf32"])
@pytest.mark.parametrize("name", ON_DEVICE)
def test_kernel_runs_on_cuda(name: str, precision: str) -> None:
    result = flowrate.benchmark(name, size="debug", precision=precision, batch_size=3, **FAST)
    assert result.environment.device_type == "cuda"
    assert all(math.isfinite(v) for v in result.losses)
    s = result.summary
    assert (s.timed_steps, s.timed_samples) == (4, 4 * 3)  # 3 calls a step
    assert s.samples_per_sec == pytest.approx(s.timed_samples / s.timed_duration_s)  # GlobalRate


def test_causal_attention_runs_on_cuda() -> None:
    result = flowrate.benchmark(
        "attention", size="debug", precision="bf16", problem_options={"causal": 1}, **FAST
    )
    assert all(math.isfinite(v) for v in result.losses)
    # causal counts the S(S+1)/2 (query, key) pairs its mask keeps of the full square's S², S = 32
    full = get_problem("attention", "debug").forward_flops_per_sample()
    assert 64 * result.problem.forward_flops_per_sample == 33 * full


@pytest.mark.parametrize("pinned", [1, 0], ids=["pinned", "pageable"])
@pytest.mark.parametrize("name", HOST_LINK)
def test_host_link_runs_on_cuda(name: str, pinned: int) -> None:
    result = flowrate.benchmark(
        name,
        size="debug",
        precision="bf16",
        problem_options={"mib": 8, "pinned": pinned},
        batch_size=2,
        **FAST,
    )
    assert all(math.isfinite(v) for v in result.losses)
    expected = (2 if name == "duplex" else 1) * 8 * 2**20
    assert result.flops.bytes_per_sample == expected
    assert result.flops.bytes_per_sec == pytest.approx(result.summary.samples_per_sec * expected)


@pytest.mark.parametrize("pinned", [1, 0], ids=["pinned", "pageable"])
@pytest.mark.parametrize("name", HOST_LINK)
def test_host_link_copies_arrive(name: str, pinned: int) -> None:
    """After a step and a device sync, every destination holds its source: the copies really ran,
    and in duplex the side stream's copy is done when the device is."""
    problem = get_problem(name, "debug", options={"pinned": pinned})
    problem.set_precision(Precision.BF16)
    device = torch.device("cuda")
    batch = problem.make_batch(2, device, torch.Generator(device).manual_seed(0))
    with torch.inference_mode():
        value = problem.loss(problem.build_model(), batch)
    torch.cuda.synchronize(device)
    assert math.isfinite(float(value))
    operands = batch[:-1]
    for tensor in operands:
        assert tensor.dtype == torch.bfloat16
        assert tensor.is_pinned() == bool(pinned) or tensor.is_cuda
    pairs = list(zip(operands[::2], operands[1::2], strict=True))  # (source, destination) pairs
    for source, destination in pairs:
        assert source.device != destination.device
        assert torch.equal(source.cpu(), destination.cpu())


def test_gemm_default_reaches_real_flops() -> None:
    result = flowrate.benchmark("gemm", precision="bf16", device="cuda", duration_s=2.0, preheat_steps=5)
    assert result.problem.forward_flops_per_sample == 2 * 4096**3
    assert result.summary.model_flops_per_sec == pytest.approx(result.summary.samples_per_sec * 2 * 4096**3)
    peak = datasheet(result, "bf16")
    assert peak.flops is not None and result.flops.peak_flops == peak.flops
    assert result.flops.mfu == pytest.approx(result.summary.model_flops_per_sec / peak.flops)
    # a dense GEMM this large runs near the tensor cores' rate; nothing runs above the datasheet's
    assert FLOOR <= result.flops.mfu <= 1.0


def test_copy_bandwidth_is_reported_against_device_memory() -> None:
    result = flowrate.benchmark("copy", precision="bf16", device="cuda", duration_s=1.0, preheat_steps=3)
    assert result.flops.bytes_per_sample == 2 * 256 * 2**20
    assert result.flops.bytes_per_sec == pytest.approx(result.summary.samples_per_sec * 2 * 256 * 2**20)
    peak = datasheet(result, "bf16")
    assert peak.memory_bandwidth is not None and result.flops.peak_bandwidth == peak.memory_bandwidth
    fraction = result.flops.bytes_per_sec / peak.memory_bandwidth
    assert result.flops.bandwidth_fraction == pytest.approx(fraction)
    # 512 MiB of traffic a call is far beyond any L2 cache: the copy runs from device memory, near
    # its datasheet bandwidth and never above it
    assert FLOOR <= fraction <= 1.0
