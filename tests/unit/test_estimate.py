"""The meta-device trace, memory per execution mode and the compile report's fields."""

from __future__ import annotations

import itertools
import json

import pytest
import torch

import flowrate
from estimate_factories import BANDWIDTH, FLOPS, TinyMLP, flat_device
from flowrate.config import Execution, Mode, OptimizerName, Precision, RunConfig
from flowrate.estimate.cost import estimate_step, estimate_streaming
from flowrate.estimate.memory import Fit, largest_batch, plan_memory, resident_need, streaming_need
from flowrate.estimate.report import build_report
from flowrate.estimate.trace import TraceError, trace_step
from flowrate.problems.registry import get_problem


def _trace(
    name: str, mode: Mode = Mode.TRAIN, precision: Precision = Precision.FP32, batch: int = 4, **options: int
):
    problem = get_problem(name, "debug", options or None)
    return problem, trace_step(
        problem, mode=mode, precision=precision, optimizer=OptimizerName.ADAMW, batch_size=batch
    )


def test_a_large_model_traces_without_allocating_its_weights() -> None:
    problem = get_problem("gpt2")
    trace = trace_step(
        problem, mode=Mode.INFER, precision=Precision.BF16, optimizer=OptimizerName.ADAMW, batch_size=64
    )
    assert trace.parameters == problem.parameter_count()  # 124 M parameters, 64 x 1024 tokens, no memory
    assert trace.flops() > 0 and trace.compute_element_size == 2
    assert {op.precision for op in trace.ops if op.kind == "matmul"} == {"bf16"}  # CPU autocast applied


def test_ops_and_activations_are_attributed_to_blocks() -> None:
    problem, trace = _trace("transformer")
    assert trace.blocks is not None and len(trace.blocks) == 4
    assert sum(b.parameters for b in trace.blocks) == problem.parameter_count()
    layers = trace.blocks[1:3]
    assert all(b.saved_bytes > 0 and b.input_bytes == 4 * 32 * 64 * 4 for b in layers)
    assert layers[0].saved_bytes == layers[1].saved_bytes
    assert sum(b.saved_bytes for b in trace.blocks) <= trace.saved_bytes
    in_blocks = sum(op.flops for op in trace.ops if op.block is not None and op.phase == "forward")
    assert in_blocks == trace.flops("forward")  # every forward FLOP happens inside a block
    assert {op.block for op in trace.ops if op.phase == "backward" and op.flops} >= {1, 2, 3}


def test_pure_bf16_stores_weights_in_two_bytes() -> None:
    _, trace = _trace("fc_mnist", precision=Precision.PURE_BF16)
    assert trace.weight_element_size == 2
    need = resident_need(trace)
    assert need.parts["weights"] == trace.parameters * 2
    assert need.parts["optimizer"] == 2 * trace.parameters * 2


def test_a_trace_leaves_no_fake_tensor_for_a_real_run() -> None:
    # resnet50 caches its channel statistics per device; the trace makes its batch on the meta
    # device, so the real run afterwards finds real tensors
    _trace("resnet50")
    result = flowrate.benchmark("resnet50", size="debug", steps=2, preheat_steps=0)
    assert result.summary.timed_steps == 2


def test_resident_memory_is_weights_gradients_optimizer_and_activations() -> None:
    problem, trace = _trace("fc_mnist", batch=16)
    p = problem.parameter_count()
    need = resident_need(trace)
    assert need.parts["weights"] == need.parts["gradients"] == 4 * p
    assert need.parts["optimizer"] == 8 * p  # AdamW: two moments
    assert need.parts["activations"] == trace.saved_bytes > 0
    assert need.device_bytes == sum(need.parts.values())
    _, inference = _trace("fc_mnist", mode=Mode.INFER, batch=16)
    assert resident_need(inference).parts["gradients"] == resident_need(inference).parts["optimizer"] == 0


def test_streaming_holds_two_blocks_on_the_device_and_the_rest_on_the_host() -> None:
    from flowrate.execution.host_memory import host_bytes_per_parameter

    _, trace = _trace("transformer")
    assert trace.blocks is not None
    sizes = [b.parameters for b in trace.blocks]
    pair = max(a + b for a, b in itertools.pairwise(sizes))
    need = streaming_need(trace)
    assert need.parts["weights"] == need.parts["gradients"] == pair * 4
    per_parameter = host_bytes_per_parameter(Mode.TRAIN, Precision.FP32, OptimizerName.ADAMW)
    assert need.host_bytes == trace.parameters * per_parameter
    recomputed = streaming_need(trace, recompute=True)
    assert recomputed.parts["activations"] < need.parts["activations"]
    _, kernel = _trace("gemm", mode=Mode.INFER, batch=1)
    assert not streaming_need(kernel).available


def test_a_fit_says_by_how_much_and_which_batch_would_fit() -> None:
    _, trace = _trace("transformer", batch=8)
    need = resident_need(trace)
    fit = Fit("device", need.device_bytes, need.device_bytes / 1.25)
    assert fit.fits is False and "(25% over)" in fit.describe("X")
    fixed = need.device_bytes - need.parts["activations"] - need.parts["working set"]
    per_sample = (need.parts["activations"] + need.parts["working set"]) / 8
    capacity = fixed + 3.5 * per_sample
    assert largest_batch(trace, need, capacity) == 3
    plan = plan_memory(trace, Execution.RESIDENT, capacity, None)
    assert not plan.ok and plan.fits[0].need == need.device_bytes


def test_the_report_agrees_with_the_problems_analytic_figures() -> None:
    problem = get_problem("fc_mnist", "debug")
    config = RunConfig(problem="fc_mnist", size="debug").for_problem(
        problem.modes, problem.default_mode, "fc_mnist"
    )
    report = build_report(config, problem, flat_device(capacity=1e9), batch_size=16, host_capacity=1e9)
    assert report.parameters == report.parameters_traced == problem.parameter_count()
    assert report.forward_flops_per_sample == problem.forward_flops_per_sample()
    assert (
        report.backward_flops_per_sample
        == problem.train_flops_per_sample() - problem.forward_flops_per_sample()
    )
    assert report.traced_forward_flops_per_sample == problem.forward_flops_per_sample()
    assert report.traced_backward_flops_per_sample == report.backward_flops_per_sample
    assert sum(row.parameters for row in report.block_rows) == problem.parameter_count()
    assert report.blocks == 3 and report.kernels_per_step > 0 and report.bytes_per_step > 0
    assert report.arithmetic_intensity == pytest.approx(
        16 * problem.train_flops_per_sample() / report.bytes_per_step
    )
    assert report.memory["chosen"] == "resident" and report.memory["fits"][0]["fits"] is True
    assert report.estimate is not None and report.estimate.batch_size == 16
    assert report.estimate.samples_per_sec == pytest.approx(16 / report.estimate.step_s)
    assert report.device["ridge_point"]["fp32"] == pytest.approx(FLOPS / BANDWIDTH)
    data = json.loads(json.dumps(report.to_dict()))
    for key in (
        "parameters",
        "forward_flops_per_sample",
        "bytes_per_step",
        "activation_bytes",
        "memory",
        "block_rows",
        "arithmetic_intensity",
        "estimate",
        "streaming",
        "cost_model",
    ):
        assert key in data


def test_the_streaming_estimate_hides_copies_behind_compute() -> None:
    trace = trace_step(
        TinyMLP(), mode=Mode.TRAIN, precision=Precision.FP32, optimizer=OptimizerName.ADAMW, batch_size=64
    )
    device = flat_device()
    step = estimate_step(trace, device)
    streamed = estimate_streaming(trace, device, step)
    assert 0 <= streamed.hidden_share <= 1
    assert streamed.step_s >= streamed.compute_s
    assert streamed.min_tokens_per_load == pytest.approx(FLOPS * 4 / (2 * BANDWIDTH))  # CPU: memory copies
    assert streamed.copy_s == pytest.approx(2 * TinyMLP().parameter_count() * 4 / BANDWIDTH)


def test_a_shape_mismatch_fails_the_trace_naming_the_stage() -> None:
    class Broken(TinyMLP):
        def build_model(self) -> torch.nn.Module:
            return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(32, 4))

    with pytest.raises(TraceError) as failure:
        trace_step(
            Broken(), mode=Mode.TRAIN, precision=Precision.FP32, optimizer=OptimizerName.ADAMW, batch_size=2
        )
    assert failure.value.stage == "forward"
    assert failure.value.detail.startswith("RuntimeError: ") and "[2, 16] X [32, 4]" in failure.value.detail
    assert "(estimate_factories.py:" in failure.value.detail  # the user's line, not PyTorch's


def test_a_cpu_run_that_releases_freed_memory_is_told_its_page_faults_are_not_priced() -> None:
    from flowrate.config import FreedMemory
    from flowrate.estimate.report import _estimate_section

    problem = TinyMLP()
    kept = _estimate_section(
        RunConfig(problem="tiny", mode=Mode.TRAIN, freed_memory=FreedMemory.KEEP), problem, 2, flat_device()
    )
    released = _estimate_section(  # the default: the C library's policy
        RunConfig(problem="tiny", mode=Mode.TRAIN),
        problem,
        2,
        flat_device(),
    )
    assert kept.note is None and released.note is not None
    assert released.samples_per_sec == kept.samples_per_sec
    assert released.note == (
        "priced with freed host memory kept (--freed-memory keep, as the calibration ran): this run "
        "released it (the C library's default), and the page faults of its fresh pages are not in "
        "the estimate"
    )


def test_an_embedding_reads_the_rows_it_gathers_not_its_table() -> None:
    # transformer/debug: a 512-token vocabulary of 64 wide; batch 4 x 32 tokens
    _, trace = _trace("transformer", mode=Mode.INFER)
    (tokens,) = [op for op in trace.ops if op.name == "aten.embedding.default" and op.elements == 512 * 64]
    rows = 4 * 32 * 64 * 4  # the gathered rows, fp32
    assert tokens.bytes == 4 * 32 * 8 + 2 * rows  # int64 ids, the rows read, the rows written


def test_training_batch_norm_reads_its_input_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    # the statistics pass and the normalising pass each read the input (the backward: the gradient
    # and the input); with running statistics (inference) one pass
    from flowrate.estimate import ops

    def norms(mode: Mode) -> list:
        _, trace = _trace("resnet50", mode=mode, batch=2)
        return [op for op in trace.ops if "batch_norm" in op.name]

    two_pass, inferring = norms(Mode.TRAIN), norms(Mode.INFER)
    monkeypatch.setattr(ops, "_TWO_PASS", {})
    one_pass, inferring_unchanged = norms(Mode.TRAIN), norms(Mode.INFER)
    assert two_pass and [op.name for op in two_pass] == [op.name for op in one_pass]
    for twice, once in zip(two_pass, one_pass, strict=True):
        passes = 1 if twice.phase == "forward" else 2  # the input; the gradient and the input
        assert twice.bytes - once.bytes == passes * 4 * twice.elements
    assert inferring and [op.bytes for op in inferring] == [op.bytes for op in inferring_unchanged]
