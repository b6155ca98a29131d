"""The per-operator counter: exact hand counts of FLOPs and bytes, every attention backend, coverage."""

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

from flowrate.measure.attention_flops import CAUSAL, Mask, count_attention, kept_pairs
from flowrate.measure.op_counter import OpCount, count_ops

aten = torch.ops.aten
B, H, S, D = 2, 4, 8, 16
# Q·Kᵀ and P·V over every (query, key) pair: 2 FLOPs x pairs x (Dqk + Dv) per head and sample
DENSE_FORWARD = 2 * B * H * S * S * (D + D)  # 32768
CAUSAL_PAIRS = S * (S + 1) // 2  # 36 of the 64 pairs
CAUSAL_FORWARD = 2 * B * H * CAUSAL_PAIRS * (D + D)  # 18432
# backward: Q·Kᵀ recomputed, then dP, dV, dQ, dK: 2 x pairs x (3·Dqk + 2·Dv) per head and sample
DENSE_BACKWARD = 2 * B * H * S * S * (3 * D + 2 * D)  # 81920
CAUSAL_BACKWARD = 2 * B * H * CAUSAL_PAIRS * (3 * D + 2 * D)  # 46080
RECOMPUTE_SHARE = 2 * D  # of the backward's 2·(3·Dqk + 2·Dv) per pair and head


def qkv(kv_heads: int = H, grad: bool = False) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    shapes = [(B, H, S, D), (B, kv_heads, S, D), (B, kv_heads, S, D)]
    return tuple(torch.randn(*s, generator=g).requires_grad_(grad) for s in shapes)


def attention_step(causal: bool, kv_heads: int = H, **kwargs: object) -> tuple[object, ...]:
    q, k, v = qkv(kv_heads, grad=True)
    _, tally = count_ops(
        lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, **kwargs).sum().backward()
    )
    return tally.flops_by_op(), tally


def test_linear_forward_and_backward_are_exact() -> None:
    linear = torch.nn.Linear(16, 8)
    x = torch.randn(4, 16, requires_grad=True)
    _, tally = count_ops(lambda: linear(x).sum().backward())
    # forward addmm 2·4·16·8, backward grad_x and grad_W one mm each of the same size
    carried = {op: flops for op, flops in tally.flops_by_op().items() if flops}
    assert carried == {"aten.addmm": 1024, "aten.mm": 2048} and tally.total_flops == 3 * 1024
    assert tally.counted_ops == ["aten.mm", "aten.addmm"] and tally.not_counted == {}


def test_bmm_flops_bytes_and_dtypes_are_exact() -> None:
    a, b = torch.randn(3, 4, 5), torch.randn(3, 5, 6)
    _, tally = count_ops(lambda: torch.bmm(a, b))
    # 2·3·4·5·6 FLOPs; reads 60 + 90 floats, writes 72
    assert tally.ops == (OpCount("aten.bmm", ("float32", "float32"), 720, (60 + 90 + 72) * 4, 1),)
    _, half = count_ops(lambda: torch.bmm(a.bfloat16(), b.bfloat16()))
    bmm = [o for o in half.ops if o.op == "aten.bmm"]
    assert bmm == [OpCount("aten.bmm", ("bfloat16", "bfloat16"), 720, (60 + 90 + 72) * 2, 1)]


def test_views_move_no_bytes_and_a_broadcast_reads_its_storage_once() -> None:
    x = torch.randn(1, 64)
    _, tally = count_ops(lambda: x.expand(32, 64).t() * 2.0)
    by_op = {o.op: o for o in tally.ops}
    assert by_op["aten.expand"].bytes == 0 and by_op["aten.t"].bytes == 0
    assert by_op["aten.mul"].bytes == 64 * 4 + 32 * 64 * 4  # the 64 stored floats, 2048 written


def test_causal_sdpa_counts_the_pairs_the_mask_keeps() -> None:
    dense, dense_tally = attention_step(causal=False)
    causal, causal_tally = attention_step(causal=True)
    forward, backward = (
        "aten._scaled_dot_product_flash_attention_for_cpu",
        ("aten._scaled_dot_product_flash_attention_for_cpu_backward"),
    )
    assert dense[forward] == DENSE_FORWARD and dense[backward] == DENSE_BACKWARD
    assert causal[forward] == CAUSAL_FORWARD and causal[backward] == CAUSAL_BACKWARD
    # the readings without backward's recomputation of Q·Kᵀ: every pair, the pairs kept
    assert causal_tally.recomputed_flops == 2 * B * H * CAUSAL_PAIRS * D
    assert dense_tally.recomputed_flops == 2 * B * H * S * S * D
    full = DENSE_FORWARD + DENSE_BACKWARD - dense_tally.recomputed_flops
    assert dense_tally.attention_full_flops == dense_tally.attention_kept_flops == full
    assert causal_tally.attention_full_flops == full
    assert (
        causal_tally.attention_kept_flops == CAUSAL_FORWARD + CAUSAL_BACKWARD - causal_tally.recomputed_flops
    )
    # without a mask the counts are PyTorch's own formulas
    shapes = [(B, H, S, D)] * 3
    assert sdpa_flop_count(*shapes) == DENSE_FORWARD
    assert sdpa_backward_flop_count((B, H, S, D), *shapes) == DENSE_BACKWARD


def test_the_cpu_flash_kernel_is_counted_forward_and_backward() -> None:
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        flops, tally = attention_step(causal=True)
    assert flops["aten._scaled_dot_product_flash_attention_for_cpu"] == CAUSAL_FORWARD
    assert flops["aten._scaled_dot_product_flash_attention_for_cpu_backward"] == CAUSAL_BACKWARD
    assert tally.total_flops == CAUSAL_FORWARD + CAUSAL_BACKWARD


def test_the_math_backend_executes_and_counts_the_full_square() -> None:
    q, k, v = qkv()
    with sdpa_kernel(SDPBackend.MATH), torch.no_grad():
        _, tally = count_ops(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert tally.total_flops == DENSE_FORWARD and tally.attention_full_flops == 0  # plain bmm's


def test_grouped_query_attention_follows_the_query_heads() -> None:
    gqa, _ = attention_step(causal=False, kv_heads=2, enable_gqa=True)
    assert gqa["aten._scaled_dot_product_flash_attention_for_cpu"] == DENSE_FORWARD
    assert gqa["aten._scaled_dot_product_flash_attention_for_cpu_backward"] == DENSE_BACKWARD
    q, k, v = qkv(kv_heads=2)
    with torch.no_grad():  # the same attention with K and V repeated to every query head
        _, repeated = count_ops(
            lambda: F.scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1))
        )
    assert repeated.total_flops == DENSE_FORWARD


@pytest.mark.parametrize("additive", [False, True])
def test_an_explicit_mask_counts_the_full_product_and_the_pairs_it_keeps_apart(additive: bool) -> None:
    window = torch.ones(S, S, dtype=torch.bool).tril().triu(-2)  # a sliding window of 3 keys
    if additive:  # as Hugging Face writes it: 0 where seen, the dtype's lowest where hidden
        window = torch.zeros(S, S).masked_fill(~window, torch.finfo(torch.float32).min)
    flops, tally = attention_step(causal=False, attn_mask=window)
    assert flops["aten._scaled_dot_product_flash_attention_for_cpu"] == DENSE_FORWARD
    assert flops["aten._scaled_dot_product_flash_attention_for_cpu_backward"] == DENSE_BACKWARD
    pairs = 1 + 2 + 6 * 3  # per head and sample
    assert tally.attention_kept_flops == 2 * B * H * pairs * (D + D) * 3  # forward + 2x backward


def test_kept_pairs_for_causal_and_windowed_masks() -> None:
    assert kept_pairs(8, 8, CAUSAL) == 36  # S·(S+1)/2
    assert kept_pairs(4, 8, CAUSAL) == 1 + 2 + 3 + 4  # is_causal: top-left
    assert kept_pairs(4, 8, Mask(right=0, bottom_right=True)) == 5 + 6 + 7 + 8  # FlashAttention
    assert kept_pairs(8, 8, Mask(left=2, right=0)) == 1 + 2 + 6 * 3
    assert kept_pairs(8, 8) == 64


def meta(*shape: int) -> torch.Tensor:
    return torch.empty(*shape, device="meta")


@pytest.mark.parametrize(
    ("op", "args"),
    [
        ("_scaled_dot_product_efficient_attention", (None, False, 0.0, True)),
        ("_scaled_dot_product_flash_attention", (0.0, True)),
        ("_scaled_dot_product_cudnn_attention", (None, False, 0.0, True)),
        ("_scaled_dot_product_fused_attention_overrideable", (None, 0.0, True)),
    ],
)
def test_every_cuda_sdpa_kernel_is_counted_with_its_causal_discount(op: str, args: tuple) -> None:
    # shapes are all a formula reads: meta tensors stand for CUDA ones
    q, k, v = meta(B, H, S, D), meta(B, 2, S, D), meta(B, 2, S, D)
    counted = count_attention(getattr(aten, op).default, (q, k, v, *args), {})
    assert counted.flops == CAUSAL_FORWARD
    assert counted.full == DENSE_FORWARD and counted.kept == CAUSAL_FORWARD and counted.recomputed == 0


def test_cuda_backward_kernels_are_counted() -> None:
    q, k, v, o = meta(B, H, S, D), meta(B, H, S, D), meta(B, H, S, D), meta(B, H, S, D)
    lse, t = meta(B, H, S), meta(2)
    flash = count_attention(
        aten._scaled_dot_product_flash_attention_backward.default,
        (o, q, k, v, o, lse, t, t, S, S, 0.0, True, t, t),
        {},
    )
    efficient = count_attention(
        aten._scaled_dot_product_efficient_attention_backward.default,
        (o, q, k, v, meta(0), o, lse, t, t, 0.0, [True] * 4, False),
        {},
    )
    assert flash.flops == CAUSAL_BACKWARD and efficient.flops == DENSE_BACKWARD


def test_raw_flash_kernel_with_a_window_and_packed_sequences() -> None:
    # (B, S, H, D) dense; a window of 2 keys back plus the diagonal, aligned bottom-right
    q = meta(B, S, H, D)
    windowed = count_attention(
        aten._flash_attention_forward.default,
        (q, q, q, None, None, S, S, 0.0, True, False),
        {"window_size_left": 2, "window_size_right": -1},
    )
    assert windowed.flops == 2 * B * H * (1 + 2 + 6 * 3) * (D + D)
    # packed: sequences of 3 and 5 tokens, (total, H, D), non-causal
    packed = meta(8, H, D)
    cum = torch.tensor([0, 3, 8])
    varlen = count_attention(
        aten._flash_attention_forward.default, (packed, packed, packed, cum, cum, 5, 5, 0.0, False, False), {}
    )
    assert varlen.flops == 2 * H * (9 + 25) * (D + D)


@torch.library.custom_op("flowrate_test::tile_mm", mutates_args=())
def tile_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A matmul kernel of a library the counter has no formula for."""
    return a @ b


def test_a_compute_op_without_a_formula_is_listed_not_counted() -> None:
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    _, tally = count_ops(lambda: tile_mm(tile_mm(a, b), b))
    assert tally.not_counted == {"flowrate_test.tile_mm": 2}
    assert tally.total_flops == 0  # its inner matmul runs inside the op, unseen


def test_to_dict_is_the_results_section() -> None:
    _, tally = count_ops(lambda: torch.mm(torch.randn(2, 3), torch.randn(3, 4)))
    section = tally.to_dict(batch_size=2)
    assert section["batch_size"] == 2 and section["flops"] == 48 and section["counted_ops"] == ["aten.mm"]
    mm = next(o for o in section["ops"] if o["op"] == "aten.mm")
    assert mm == {"op": "aten.mm", "dtypes": ["float32", "float32"], "flops": 48, "bytes": 104, "calls": 1}


@pytest.mark.parametrize("groups", [1, 8])
def test_a_convolutions_backward_is_twice_its_forward_grouped_or_not(groups: int) -> None:
    # torch 2.13's own formula counts a grouped convolution's weight gradient once per group
    x = torch.randn(2, 8, 10, 10, requires_grad=True)
    w = torch.randn(8, 8 // groups, 3, 3, requires_grad=True)
    out, forward = count_ops(lambda: F.conv2d(x, w, padding=1, groups=groups))
    _, backward = count_ops(lambda: out.sum().backward())
    multiply_adds = 2 * 8 * 10 * 10 * (8 // groups) * 3 * 3  # outputs x (C_in / groups) x 3 x 3
    assert forward.total_flops == 2 * multiply_adds
    assert backward.total_flops == 2 * forward.total_flops
