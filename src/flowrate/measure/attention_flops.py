"""FLOPs of every attention kernel PyTorch dispatches to, with the masks the kernel skips.

``scaled_dot_product_attention`` reaches the dispatcher as one fused op per backend: the CPU's
flash kernel, CUDA's flash, memory-efficient and cuDNN kernels, a device's "overrideable" one, and
the raw flash and efficient kernels that nested (variable-length) tensors call. Each counts the two
products Q·Kᵀ and P·V over the (query, key) pairs the kernel keeps:

- forward: 2·Hq·pairs·(Dqk + Dv); backward: 2·Hq·pairs·(3·Dqk + 2·Dv), which includes the
  kernel's recomputation of Q·Kᵀ (2·Hq·pairs·Dqk, reported apart as ``recomputed``). FLOPs follow
  the query heads: grouped-query attention (fewer K/V heads) is counted at Hq.
- pairs: Sq·Sk without a mask. A causal mask keeps Σᵢ min(i + 1, Sk) pairs (top-left aligned, as
  ``is_causal`` is documented): S·(S + 1)/2 for square attention. The raw flash kernel aligns its
  causal mask and its sliding window (``window_size_left/right``) bottom-right, as FlashAttention
  does; the raw efficient kernel's ``custom_mask_type`` says which (1 top-left, 2 bottom-right) and
  its ``window_size`` keeps the last ``window_size`` keys up to the diagonal (xFormers' local mask).
  Tiled kernels compute a little more on the diagonal tiles; that is not counted.
- an explicit mask tensor (boolean or additive: a padding, causal or sliding-window mask) is
  applied element by element to the full product, so the full Sq·Sk is counted as executed; the
  pairs it hides are counted apart.

Beside the executed FLOPs, two readings without backward's recomputation: ``full`` (every pair)
and ``kept`` (the pairs every mask keeps), so a model-FLOPs formula of either convention can be
compared with the count.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

aten = torch.ops.aten


@dataclass(frozen=True)
class AttentionFlops:
    flops: int  # executed: over the pairs the kernel's causal mask or window keeps
    recomputed: int  # backward's recomputation of Q·Kᵀ, included in flops
    # the readings a model formula may use, both without backward's recomputation:
    full: int  # over every pair, as if no mask
    kept: int  # over the pairs every mask keeps, an explicit mask tensor's too


@dataclass(frozen=True)
class Mask:
    """Which keys query i sees: i + offset - left <= j <= i + offset + right (None: unbounded)."""

    left: int | None = None
    right: int | None = None
    bottom_right: bool = False  # offset Sk - Sq (else 0)

    @property
    def dense(self) -> bool:
        return self.left is None and self.right is None


NO_MASK = Mask()
CAUSAL = Mask(right=0)


@functools.lru_cache(maxsize=256)
def kept_pairs(s_q: int, s_k: int, mask: Mask = NO_MASK) -> int:
    """(query, key) pairs the mask keeps in an Sq x Sk attention."""
    if mask.dense:
        return s_q * s_k
    offset = s_k - s_q if mask.bottom_right else 0
    total = 0
    for i in range(s_q):
        low = 0 if mask.left is None else max(0, i + offset - mask.left)
        high = s_k - 1 if mask.right is None else min(s_k - 1, i + offset + mask.right)
        total += max(0, high - low + 1)
    return total


def attention_flops(
    heads_q: int,
    d_qk: int,
    d_v: int,
    lengths: Sequence[tuple[int, int]],
    mask: Mask,
    backward: bool,
    hidden: int = 0,
) -> AttentionFlops:
    """FLOPs over sequences of (Sq, Sk) lengths (one per batch element) with ``heads_q`` heads;
    ``hidden``: (query, key) pairs over all heads that an explicit mask tensor hides."""
    # per pair: Q·Kᵀ and P·V forward; dP, dV, dQ and dK (twice that) backward, plus Q·Kᵀ again
    work = 2 * (d_qk + d_v) * (2 if backward else 1)
    recompute = 2 * d_qk if backward else 0
    kept = heads_q * sum(kept_pairs(s_q, s_k, mask) for s_q, s_k in lengths)
    full = heads_q * sum(s_q * s_k for s_q, s_k in lengths)
    return AttentionFlops(
        flops=(work + recompute) * kept,
        recomputed=recompute * kept,
        full=work * full,
        kept=work * (kept - hidden),
    )


def hidden_pairs(mask: torch.Tensor | None, shape: tuple[int, int, int, int]) -> int:
    """(query, key) pairs an explicit mask hides over ``shape`` (B, Hq, Sq, Sk), which it
    broadcasts to: False in a boolean mask, -inf (or the dtype's lowest, as Hugging Face writes
    it) in an additive one."""
    if mask is None or mask.numel() == 0:
        return 0
    hides = ~mask if mask.dtype == torch.bool else mask <= torch.finfo(mask.dtype).min / 2
    return int(hides.sum()) * (shape[0] * shape[1] * shape[2] * shape[3] // mask.numel())


def _sdpa(args: dict[str, Any], backward: bool) -> AttentionFlops:
    """The fused SDPA ops: query (B, Hq, Sq, D), key and value (B, Hkv, Sk, D)."""
    q, k, v = args["query"].shape, args["key"].shape, args["value"].shape
    mask = CAUSAL if args.get("is_causal") else NO_MASK
    explicit = args.get("attn_mask", args.get("attn_bias"))
    hidden = hidden_pairs(explicit, (q[0], q[1], q[2], k[2]))
    return attention_flops(q[1], q[3], v[3], [(q[2], k[2])] * q[0], mask, backward, hidden)


def _lengths(query: torch.Tensor, key: torch.Tensor, cum_q: Any, cum_k: Any) -> list[tuple[int, int]]:
    """(Sq, Sk) per sequence of the raw kernels: (B, S, H, D) dense, or packed with offsets."""
    if cum_q is None:
        return [(query.shape[-3], key.shape[-3])] * query.shape[0]
    return list(zip(cum_q.diff().tolist(), cum_k.diff().tolist(), strict=True))


def _window(size: int | None) -> int | None:
    return None if size is None or size < 0 else int(size)


def _flash(args: dict[str, Any], backward: bool) -> AttentionFlops:
    """The raw flash kernel: causal and windows aligned bottom-right, as FlashAttention does."""
    q, k, v = args["query"], args["key"], args["value"]
    left, right = _window(args.get("window_size_left")), _window(args.get("window_size_right"))
    if args.get("is_causal"):
        right = 0
    mask = Mask(left, right, bottom_right=True)
    lengths = _lengths(q, k, args.get("cum_seq_q"), args.get("cum_seq_k"))
    return attention_flops(q.shape[-2], q.shape[-1], v.shape[-1], lengths, mask, backward)


def _efficient(args: dict[str, Any], backward: bool) -> AttentionFlops:
    """The raw efficient kernel: custom_mask_type 1 causal top-left, 2 causal bottom-right."""
    q, k, v = args["query"], args["key"], args["value"]
    kind = args.get("custom_mask_type", 0)
    window = _window(args.get("window_size"))
    left = window - 1 if window else None
    mask = Mask(left, 0, bottom_right=kind == 2) if kind in (1, 2) else Mask(left, None)
    lengths = _lengths(q, k, args.get("cu_seqlens_q"), args.get("cu_seqlens_k"))
    hidden = 0 if args.get("cu_seqlens_q") is not None else hidden_pairs(args.get("bias"), _bhss(q, k))
    return attention_flops(q.shape[-2], q.shape[-1], v.shape[-1], lengths, mask, backward, hidden)


def _bhss(query: torch.Tensor, key: torch.Tensor) -> tuple[int, int, int, int]:
    """(B, Hq, Sq, Sk) of the raw kernels' (B, S, H, D) layout."""
    return query.shape[0], query.shape[2], query.shape[1], key.shape[1]


Formula = Callable[[dict[str, Any], bool], AttentionFlops]


def _table() -> dict[Any, tuple[Formula, bool]]:
    fused = [
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_fused_attention_overrideable",
    ]
    table: dict[Any, tuple[Formula, bool]] = {}
    for name in fused:
        table[getattr(aten, name)] = (_sdpa, False)
        table[getattr(aten, name + "_backward")] = (_sdpa, True)
    table[aten._flash_attention_forward] = (_flash, False)
    table[aten._flash_attention_backward] = (_flash, True)
    table[aten._efficient_attention_forward] = (_efficient, False)
    table[aten._efficient_attention_backward] = (_efficient, True)
    return table


# op overload packet -> (formula, is backward); arguments bound by their schema names
ATTENTION_OPS = _table()


def count_attention(
    func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> AttentionFlops:
    """FLOPs of one call of an attention op in ATTENTION_OPS."""
    formula, backward = ATTENTION_OPS[func._overloadpacket]
    names = [argument.name for argument in func._schema.arguments]
    bound = dict(zip(names, args, strict=False)) | kwargs
    if "grad_out_" in bound:  # the efficient backward's spelling
        bound["grad_out"] = bound["grad_out_"]
    return formula(bound, backward)
