"""Attention as the target runs it: fused in its inputs' dtype on a GPU, the CPU's math path on a CPU,
or op by op in its inputs' dtype, as a published implementation without a fused kernel runs it.

BERT-style attention (a float padding mask, dropout in training) cannot take the CPU's fused
kernel, and the CPU's math path upcasts 16-bit inputs to fp32; a fp16 GPU runs it as one fused
kernel in fp16. The trace for a GPU target must price the GPU's kernel.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import flowrate
from estimate_factories import flat_device
from flowrate.config import Mode, OptimizerName, Precision, RunConfig
from flowrate.estimate.report import build_report
from flowrate.estimate.trace import EXPLICIT, FUSED, NATIVE, StepTrace, trace_step

B, H, L, E = 2, 2, 16, 32  # batch, heads, sequence, head width


class _Attention(nn.Module):
    def __init__(self, kv_heads: int) -> None:
        super().__init__()
        self.kv_heads = kv_heads
        self.q = nn.Linear(H * E, H * E)
        self.kv = nn.Linear(H * E, 2 * kv_heads * E)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q = self.q(x).view(B, L, H, E).transpose(1, 2)
        k, v = (t.view(B, L, self.kv_heads, E).transpose(1, 2) for t in self.kv(x).chunk(2, -1))
        dropout = 0.1 if self.training else 0.0
        gqa = self.kv_heads != H
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, enable_gqa=gqa)


class _BertAttention(flowrate.Problem):
    """One attention with BERT's float padding mask (B, 1, 1, L) and dropout."""

    name = "bert_attention"
    default_batch_size = B

    def __init__(self, kv_heads: int = H) -> None:
        self.kv_heads = kv_heads

    def build_model(self) -> nn.Module:
        return _Attention(self.kv_heads)

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> flowrate.Batch:
        return (torch.randn(B, L, H * E, device=device), torch.zeros(B, 1, 1, L, device=device))

    def loss(self, model: nn.Module, batch: flowrate.Batch) -> torch.Tensor:
        return model(*batch).float().sum()

    def parameter_count(self) -> int:
        return (H * E + 1) * (H * E + 2 * self.kv_heads * E)

    def forward_flops_per_sample(self) -> int:
        return 0


def _trace(mode: Mode, precision: Precision, fused: bool | str, kv_heads: int = H) -> StepTrace:
    attention = fused if isinstance(fused, str) else FUSED if fused else NATIVE
    return trace_step(
        _BertAttention(kv_heads),
        mode=mode,
        precision=precision,
        optimizer=OptimizerName.ADAMW,
        batch_size=B,
        attention=attention,
    )


def _attention_matmuls(trace: StepTrace) -> list[tuple[str, str, str]]:
    """(name, phase, precision) of the ops that multiply queries, keys and values."""
    return [
        (op.name.split(".")[1], op.phase, op.precision)
        for op in trace.ops
        if op.kind.startswith("attention") or op.name.startswith("aten.bmm")
    ]


def test_the_cpu_trace_runs_fp16_attention_in_fp32_as_the_cpu_does() -> None:
    trace = _trace(Mode.TRAIN, Precision.FP16, fused=False)
    assert {precision for _, _, precision in _attention_matmuls(trace)} == {"fp32"}
    assert {op.precision for op in trace.ops if op.name.startswith("aten.addmm")} == {"fp16"}


def test_a_gpu_trace_runs_it_as_one_fused_kernel_in_the_inputs_dtype() -> None:
    trace = _trace(Mode.TRAIN, Precision.FP16, fused=True)
    assert _attention_matmuls(trace) == [
        ("_scaled_dot_product_flash_attention_for_cpu", "forward", "fp16"),
        ("_scaled_dot_product_flash_attention_for_cpu_backward", "backward", "fp16"),
    ]
    forward, backward = (op for op in trace.ops if op.kind.startswith("attention"))
    assert forward.flops == 2 * (2 * B * H * L * L * E)  # scores and the weighted sum
    assert backward.flops == 5 * (2 * B * H * L * L * E)  # the scores again, and four gradients
    # the fused kernel keeps no (B, H, L, L) probabilities for backward
    unfused = _trace(Mode.TRAIN, Precision.FP16, fused=False)
    assert unfused.saved_bytes - trace.saved_bytes >= B * H * L * L * 2


def test_inference_in_bf16_is_fused_as_well() -> None:
    trace = _trace(Mode.INFER, Precision.BF16, fused=True)
    assert _attention_matmuls(trace) == [("_scaled_dot_product_flash_attention_for_cpu", "forward", "bf16")]


def test_grouped_query_attention_keeps_the_math_path() -> None:
    # the fused kernel takes as many key heads as query heads: these stay on the CPU's path
    fused = _trace(Mode.TRAIN, Precision.FP16, fused=True, kv_heads=1)
    assert _attention_matmuls(fused) == _attention_matmuls(_trace(Mode.TRAIN, Precision.FP16, False, 1))
    assert {precision for _, _, precision in _attention_matmuls(fused)} == {"fp32"}


@pytest.mark.parametrize(("device_type", "fused"), [("cuda", True), ("cpu", False)])
def test_the_report_traces_attention_as_its_device_runs_it(device_type: str, fused: bool) -> None:
    config = RunConfig(problem="bert_attention", mode=Mode.TRAIN, precision=Precision.FP16, batch_size=B)
    device = dataclasses.replace(flat_device(), device_type=device_type)
    report = build_report(config, _BertAttention(), device, batch_size=B)
    expected = _trace(Mode.TRAIN, Precision.FP16, fused=fused)
    assert report.kernels_per_step == expected.kernels()
    assert report.traced_forward_flops_per_sample == expected.flops("forward") / B


def test_explicit_attention_is_priced_op_by_op_in_the_inputs_dtype() -> None:
    trace = _trace(Mode.TRAIN, Precision.FP16, EXPLICIT)
    scores = B * H * L * L
    forward = [
        op for op in trace.ops if op.phase == "forward" and op.name.startswith(("aten.bmm", "aten._softmax"))
    ]
    # the scores' and the weighted sum's batched matmuls and the softmax, all in fp16
    assert [(op.name.split(".")[1], op.precision) for op in forward] == [
        ("bmm", "fp16"),
        ("_softmax", "fp16"),
        ("bmm", "fp16"),
    ]
    assert forward[0].flops == forward[2].flops == 2 * scores * E
    softmax = forward[1]
    assert softmax.bytes == 2 * scores * 2  # the fp16 score matrix read and written
    # one dropout kernel, as a GPU runs it: reads the probabilities, writes them and a bool mask
    (dropout,) = [op for op in trace.ops if op.phase == "forward" and "dropout" in op.name]
    assert dropout.name == "aten.native_dropout.default" and dropout.precision == "fp16"
    assert dropout.bytes == scores * (2 + 2 + 1)
    assert not [op for op in trace.ops if op.kind.startswith("attention")]


def test_the_published_bert_cases_price_their_implementations_explicit_attention() -> None:
    from estimate_published import CASES

    bert = [case for case in CASES if case.problem == "hf:bert"]
    assert bert and all(case.attention == EXPLICIT for case in bert)
    assert all(case.command().endswith("--attention explicit") for case in bert)


@pytest.mark.parametrize(("target", "expected"), [("a100-80gb", FUSED), (None, NATIVE)])
def test_validate_traces_attention_as_the_checked_device_runs_it(target: str | None, expected: str) -> None:
    from flowrate.estimate.validate import validate
    from flowrate.problems.registry import get_problem

    fields = {"problem": "bert-base", "size": "debug", "mode": Mode.TRAIN, "precision": Precision.FP16}
    result = validate(fields, target=target)
    assert result.trace is not None and result.attention == expected
    problem = get_problem("bert-base", "debug", {})
    direct = trace_step(
        problem,
        mode=Mode.TRAIN,
        precision=Precision.FP16,
        optimizer=OptimizerName.ADAMW,
        batch_size=result.trace.batch_size,
        attention=expected,
    )
    assert [op.name for op in result.trace.ops] == [op.name for op in direct.ops]
    assert result.trace.saved_bytes == direct.saved_bytes  # what the memory check counts
