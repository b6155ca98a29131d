"""The roofline cost model on cases computed by hand: one GEMM, and a small MLP op by op."""

from __future__ import annotations

import dataclasses
import math

import pytest

from estimate_factories import BANDWIDTH, FLOPS, OVERHEAD, TinyMLP, flat_device
from flowrate.config import Mode, OptimizerName, Precision
from flowrate.estimate.cost import estimate_step, op_cost
from flowrate.estimate.devices import EstimateUnavailable, interpolate
from flowrate.estimate.ops import FORWARD, Op
from flowrate.estimate.trace import StepTrace, trace_step
from flowrate.problems.registry import get_problem

F32 = 4


def _trace(problem: object, mode: Mode = Mode.INFER, batch: int = 2, precision: Precision = Precision.FP32):
    return trace_step(
        problem,  # type: ignore[arg-type]
        mode=mode,
        precision=precision,
        optimizer=OptimizerName.ADAMW,
        batch_size=batch,
    )


def test_a_gemm_costs_the_larger_of_its_flops_and_bytes_plus_the_launch() -> None:
    m, n, k = 64, 96, 128
    trace = _trace(get_problem("gemm", "debug", {"m": m, "n": n, "k": k}), batch=1)
    [gemm] = [op for op in trace.ops if op.kind == "matmul"]
    assert gemm.flops == 2 * m * n * k
    assert gemm.bytes == (m * k + k * n + m * n) * F32
    assert gemm.thin == min(m, n, k)
    compute, memory = 2 * m * n * k / FLOPS, (m * k + k * n + m * n) * F32 / BANDWIDTH
    cost = op_cost(gemm, flat_device(), "infer")
    assert cost.seconds == pytest.approx(max(compute, memory) + OVERHEAD, rel=1e-12)
    # memory-bound on a device with little bandwidth, compute-bound with little FLOP/s
    assert op_cost(gemm, flat_device(bandwidth=1e6), "infer").seconds == pytest.approx(
        (m * k + k * n + m * n) * F32 / 1e6 + OVERHEAD
    )
    assert op_cost(gemm, flat_device(flops=1e6), "infer").seconds == pytest.approx(
        2 * m * n * k / 1e6 + OVERHEAD
    )


def test_an_mlp_is_the_sum_of_its_ops_each_priced_by_hand() -> None:
    batch = 2
    trace = _trace(TinyMLP(), batch=batch)
    kernels = [op for op in trace.ops if op.kernel]
    names = [op.name.split(".")[1] for op in kernels]
    assert names == ["addmm", "relu", "addmm", "sum"]
    hidden, out = batch * 16, batch * 4
    expected = {
        # addmm(bias, x, Wᵀ): reads bias, x and W, writes the output
        0: (2 * batch * 8 * 16, (16 + batch * 8 + 8 * 16 + hidden) * F32),
        1: (0, 2 * hidden * F32),  # relu: read and write the hidden activations
        2: (2 * batch * 16 * 4, (4 + hidden + 16 * 4 + out) * F32),
        3: (0, (out + 1) * F32),  # sum to a scalar
    }
    total = 0.0
    for i, op in enumerate(kernels):
        flops, moved = expected[i]
        assert (op.flops, op.bytes) == (flops, moved), op.name
        seconds = max(flops / FLOPS, moved / BANDWIDTH) + OVERHEAD
        assert op_cost(op, flat_device(), "infer").seconds == pytest.approx(seconds)
        total += seconds
    estimate = estimate_step(trace, flat_device())
    assert estimate.step_s == pytest.approx(total)
    assert estimate.samples_per_sec == pytest.approx(batch / total)
    assert estimate.kernels == 4
    assert estimate.overhead_s == pytest.approx(4 * OVERHEAD)
    assert sum(estimate.phase_s.values()) == pytest.approx(total)


def test_views_cost_nothing_and_16_bit_matmuls_run_at_their_rate() -> None:
    view = Op("aten.view.default", FORWARD, None, 0, 0, "fp32", False)
    assert op_cost(view, flat_device()).seconds == 0.0
    half = Op("aten.mm.default", FORWARD, None, 10**9, 0, "bf16", True, "matmul")
    assert op_cost(half, flat_device()).compute_s == pytest.approx(1e9 / (2 * FLOPS))
    with pytest.raises(EstimateUnavailable, match="no fp16 FLOP/s"):
        op_cost(Op("aten.mm.default", FORWARD, None, 1, 0, "fp16", True, "matmul"), flat_device())


def test_training_traces_backward_and_the_optimizer() -> None:
    trace = _trace(TinyMLP(), mode=Mode.TRAIN, batch=4)
    phases = {op.phase for op in trace.ops if op.kernel}
    assert phases == {"forward", "backward", "optimizer"}
    assert trace.flops("forward") == 4 * TinyMLP().forward_flops_per_sample()
    # backward: weight gradients of both layers, the input gradient of the second only
    assert trace.flops("backward") == 4 * 2 * (8 * 16 + 2 * 16 * 4)
    [update] = [op for op in trace.ops if op.kind == "optimizer"]
    assert update.elements == TinyMLP().parameter_count()
    assert trace.optimizer_states == 2


def test_curves_interpolate_in_log_log_and_stay_flat_past_their_ends() -> None:
    curve = ((1e3, 1e9), (1e5, 1e11))
    assert interpolate(curve, 10) == 1e9
    assert interpolate(curve, 1e9) == 1e11
    assert interpolate(curve, 1e4) == pytest.approx(1e10)
    assert math.isclose(interpolate(curve, 1e3), 1e9)


def _matmuls(*seconds: float) -> StepTrace:
    """An inference step of fp32 matmuls, each ``seconds`` long on flat_device (no bytes)."""
    ops = tuple(
        Op("aten.mm.default", FORWARD, None, round(s * FLOPS), 0, "fp32", True, "matmul") for s in seconds
    )
    return StepTrace(Mode.INFER, Precision.FP32, OptimizerName.ADAMW, 1, ops, 0, 4, 4, 0, 0, None)


def test_a_gpu_step_waits_for_the_later_of_its_host_and_its_device() -> None:
    # kernels of 4, 30 and 2 µs, each queued after 10 µs of host time: the host queues at 10, 20
    # and 30 µs; the device runs 10-14, 20-50 (the second kernel hides the third's launch) and
    # 50-52: 52 µs, where a CPU, dispatching and computing on the same cores, takes 36 + 30
    trace = _matmuls(4e-6, 30e-6, 2e-6)
    gpu = estimate_step(trace, flat_device(overhead=10e-6, device_type="cuda"))
    assert gpu.step_s == pytest.approx(52e-6)
    assert gpu.terms["compute"] == pytest.approx(36e-6)
    assert gpu.terms["launch"] == pytest.approx(16e-6)  # the host time nothing hid
    assert sum(gpu.phase_s.values()) == pytest.approx(52e-6)
    assert estimate_step(trace, flat_device(overhead=10e-6)).step_s == pytest.approx(66e-6)


def test_a_gpu_step_is_its_hosts_when_kernels_are_short_and_its_devices_when_long() -> None:
    short = estimate_step(_matmuls(*[1e-6] * 50), flat_device(overhead=10e-6, device_type="cuda"))
    assert short.step_s == pytest.approx(50 * 10e-6 + 1e-6)  # the last kernel runs after the host
    long = estimate_step(_matmuls(*[1e-3] * 50), flat_device(overhead=10e-6, device_type="cuda"))
    assert long.step_s == pytest.approx(10e-6 + 50 * 1e-3)  # only the first launch shows


def test_in_training_bytes_move_at_the_bandwidth_of_the_saved_activations() -> None:
    # a cache holding up to 1 MB at 4x the memory's bandwidth: a training step that saves 1 GB of
    # activations streams even its small ops' bytes from memory; inference keeps them in cache
    device = dataclasses.replace(flat_device(flops=1e15), bandwidth=((1e6, 4 * BANDWIDTH), (1e9, BANDWIDTH)))
    trace = _trace(TinyMLP(), mode=Mode.TRAIN)
    (relu,) = [op for op in trace.ops if op.name == "aten.relu.default"]
    assert op_cost(relu, device, "train").memory_s == pytest.approx(relu.bytes / (4 * BANDWIDTH))
    assert op_cost(relu, device, "train", 10**9).memory_s == pytest.approx(relu.bytes / BANDWIDTH)
    assert op_cost(relu, device, "train", relu.bytes // 2).memory_s == op_cost(relu, device, "train").memory_s

    def memory(saved: int) -> float:
        return estimate_step(dataclasses.replace(trace, saved_bytes=saved), device).terms["memory"]

    assert trace.saved_bytes < 1e6
    assert memory(10**9) == pytest.approx(4 * memory(trace.saved_bytes), rel=1e-12)
