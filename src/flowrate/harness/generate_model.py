"""The decoders `flowrate generate` drives, and their shapes: context, KV-cache size, FLOPs, bytes.

Two kinds: the zoo transformer (its own preallocated KVCache, problems/transformer.py) and a
transformers causal LM (hf:…, with transformers' DynamicCache). Both are stepped the same way —
``step(ids) -> logits`` over a cache that grows — so the timed loop is one loop.

Formulas (one multiply-add = 2 FLOPs):
- KV-cache bytes per token = 2 (keys and values) × layers × kv_heads × head_dim × dtype bytes;
- prefill FLOPs per sequence = 2·(N − H)·P + 2·H·L + layers × 4·d × P(P + 1)/2, N the matmul
  weights (the LM head's H included), L the positions whose logits are computed (1: the last, which
  the first token is sampled from, as a server computes it; P with --prefill-logits all),
  d = heads × head_dim, query i of the prompt attending to keys 0..i;
- a decode step at context c (the new token is position c): 2·N + layers × 4·d × (c + 1) FLOPs
  per sequence, and it reads every weight once plus the cache's B × (c + 1) positions.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from flowrate.errors import ConfigError
from flowrate.problems.base import Problem
from flowrate.units import gib

NOT_CAUSAL = "generate needs a causal LM (the zoo transformer or an hf: decoder)"


@dataclass(frozen=True)
class Shape:
    """What the formulas need of a decoder."""

    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    context: int  # positions the model can hold: prompt + new tokens must fit
    vocab_size: int

    def kv_bytes_per_token(self, dtype: torch.dtype) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype.itemsize

    def attention_flops(self, pairs: float) -> float:
        """FLOPs of the scores and weighted values over this many (query, key) pairs, all layers."""
        return self.layers * 4 * self.heads * self.head_dim * pairs


@dataclass(frozen=True)
class Work:
    """One generation's model FLOPs (prefill, decode) and the bytes its decode steps read."""

    prefill_flops: float
    decode_flops: float
    decode_bytes: float  # every weight once per step + the cache's positions the step attends to

    @classmethod
    def of(
        cls,
        shape: Shape,
        n: int,
        weights: int,
        kv: int,
        batch: int,
        prompt: int,
        new: int,
        head: int = 0,
        logits_positions: int | None = None,
    ) -> Work:
        """n matmul weights (head of them the LM head's), weights and kv (per token) in bytes; the
        prefill's head runs at ``logits_positions`` (None: every prompt position); the module
        docstring's formulas."""
        contexts = range(prompt, prompt + new - 1)  # each decode step's new position
        positions = prompt if logits_positions is None else logits_positions
        body = 2 * (n - head) * prompt + 2 * head * positions
        return cls(
            prefill_flops=batch * (body + shape.attention_flops(prompt * (prompt + 1) / 2)),
            decode_flops=batch * sum(2 * n + shape.attention_flops(c + 1) for c in contexts),
            decode_bytes=sum(weights + batch * (c + 1) * kv for c in contexts),
        )


class Decoder:
    """A built model and a fresh cache per generation: step(ids) -> logits (B, T, V)."""

    def __init__(self, problem: Problem, model: nn.Module) -> None:
        self.problem = problem
        self.model: Any = model  # GPT or a transformers model: each has its own cache calls
        self.shape = shape_of(problem)
        self._cache: Any = None

    def begin(self, batch_size: int, max_len: int) -> None:
        """A new, empty cache for batch_size sequences of up to max_len positions."""
        if _is_zoo(self.problem):
            self._cache = self.model.new_cache(batch_size, max_len)
        else:
            from transformers import DynamicCache

            self._cache = DynamicCache(config=self.model.config)

    def step(self, ids: torch.Tensor, last_only: bool = True) -> torch.Tensor:
        """Feed ids (B, T) after the cached ones; the logits of the last position (B, 1, V), or with
        ``last_only`` False of every position (B, T, V)."""
        if _is_zoo(self.problem):
            logits: torch.Tensor = self.model.cached(ids, self._cache, last_only=last_only)
            return logits
        with warnings.catch_warnings():
            # transformers 5.x warns "`past_key_values` is deprecated … Use `cache` instead" (a
            # FutureWarning) at every call; `cache` is unknown to the 4.x releases flowrate takes
            warnings.filterwarnings(
                "ignore", message=".*past_key_values.* is deprecated", category=FutureWarning
            )
            keep = 1 if last_only else 0  # transformers: 0 keeps every position's logits
            return self.model(
                input_ids=ids, past_key_values=self._cache, use_cache=True, logits_to_keep=keep
            ).logits

    def cache_bytes_per_token(self) -> float:
        """Measured: the cache's tensors' bytes over the (sequence, position) slots they hold."""
        cache = self._cache
        if _is_zoo(self.problem):
            batch, _, positions, _ = cache.keys[0].shape
            return cache.nbytes() / (batch * positions)
        tensors = [t for layer in cache.layers for t in (layer.keys, layer.values)]
        batch, positions = tensors[0].shape[0], cache.get_seq_length()
        return sum(t.numel() * t.element_size() for t in tensors) / (batch * positions)


def check_decoder(problem: Problem) -> None:
    from flowrate.problems.sources.hf_text import CausalLM

    if not (_is_zoo(problem) or isinstance(problem, CausalLM)):
        raise ConfigError("problem", f"{problem.name} is not a decoder: {NOT_CAUSAL}")


def _is_zoo(problem: Problem) -> bool:
    from flowrate.problems.transformer import TransformerLM

    return isinstance(problem, TransformerLM)


def shape_of(problem: Problem) -> Shape:
    check_decoder(problem)
    if _is_zoo(problem):
        c = problem.config  # type: ignore[attr-defined]  # TransformerLM's
        return Shape(c.layers, c.heads, c.heads, c.hidden // c.heads, c.seq_len, c.vocab_size)
    c = problem.config  # type: ignore[attr-defined]  # a transformers PretrainedConfig
    heads = int(c.num_attention_heads)
    head_dim = getattr(c, "head_dim", None) or int(c.hidden_size) // heads
    kv_heads = getattr(c, "num_key_value_heads", None) or heads
    context = getattr(c, "max_position_embeddings", None) or getattr(c, "n_positions", None)
    if context is None:
        raise ConfigError("problem", f"{problem.name}'s config gives no context (max_position_embeddings)")
    return Shape(
        int(c.num_hidden_layers), heads, int(kv_heads), int(head_dim), int(context), int(c.vocab_size)
    )


def head_weights(problem: Problem, model: nn.Module) -> int:
    """H: the LM head's weights (hidden × vocabulary), the part of N a prefill of the last position
    runs once instead of once per prompt position."""
    if _is_zoo(problem):
        c = problem.config  # type: ignore[attr-defined]
        return int(c.hidden * c.vocab_size)
    output_embeddings = getattr(model, "get_output_embeddings", None)
    weight = getattr(output_embeddings(), "weight", None) if callable(output_embeddings) else None
    return int(weight.numel()) if weight is not None else 0


def matmul_weights(problem: Problem, model: nn.Module) -> int:
    """N: the weights of the model's matmuls, the (tied) LM head included."""
    if _is_zoo(problem):
        c = problem.config  # type: ignore[attr-defined]
        return c.layers * 12 * c.hidden * c.hidden + c.hidden * c.vocab_size
    from flowrate.problems.sources.hf_model import matmul_weights as linear_weights

    return linear_weights(model)


def weight_bytes(model: nn.Module) -> int:
    """Every parameter and buffer once (a tied weight is one Parameter)."""
    tensors = [*model.parameters(), *model.buffers()]
    return sum(t.numel() * t.element_size() for t in tensors)


WEIGHT_DTYPES = {
    "fp32": torch.float32,
    "bf16": torch.bfloat16,
    "pure-bf16": torch.bfloat16,
    "fp16": torch.float16,
}


def weight_dtype(precision: str) -> torch.dtype:
    """generate casts the weights (and so the cache) to the precision: no autocast, as served."""
    if precision not in WEIGHT_DTYPES:
        raise ConfigError("precision", f"generate takes {', '.join(WEIGHT_DTYPES)}; got {precision!r}")
    return WEIGHT_DTYPES[precision]


def lengths(shape: Shape, prompt_len: int | None, new_tokens: int | None) -> tuple[int, int]:
    """The prompt and output lengths, defaults min(128, context/2) and the rest up to 128; refused
    before running when they do not fit the model's context."""
    prompt = prompt_len if prompt_len is not None else min(128, shape.context // 2)
    if prompt < 1:
        raise ConfigError("prompt_len", "must be at least 1")
    if prompt >= shape.context:
        raise ConfigError(
            "prompt_len",
            f"{prompt} tokens leave no position for a new token in the model's context of "
            f"{shape.context}: give at most {shape.context - 1}",
        )
    new = new_tokens if new_tokens is not None else min(128, shape.context - prompt)
    if new < 1:
        raise ConfigError("new_tokens", "must be at least 1")
    if prompt + new > shape.context:
        raise ConfigError(
            "new_tokens",
            f"prompt ({prompt}) + new tokens ({new}) = {prompt + new} exceed the model's context of "
            f"{shape.context} positions",
        )
    return prompt, new


# --batch-size auto: the share of the free memory the caches and the prefill's logits may take
AUTO_SHARE = 0.9


def memory_plan(
    shape: Shape,
    dtype: torch.dtype,
    prompt: int,
    context: int,
    free_bytes: float | None,
    logits_positions: int = 1,
) -> dict[str, Any]:
    """How many sequences of this context fit: AUTO_SHARE × free memory (after the weights are
    loaded) over each sequence's KV cache (context × bytes per token) plus its prefill logits
    (logits_positions × vocab × dtype bytes); and the longest context one sequence could hold."""
    per_token = shape.kv_bytes_per_token(dtype)
    logits = logits_positions * shape.vocab_size * dtype.itemsize
    if free_bytes is None:
        return {"free_bytes": None, "max_batch_size": None, "max_context_at_batch_1": None}
    budget = AUTO_SHARE * free_bytes
    longest = int(max(0.0, budget - logits) // per_token)
    return {
        "free_bytes": int(free_bytes),
        "max_batch_size": int(budget // (context * per_token + logits)),
        "max_context_at_batch_1": min(shape.context, longest),
    }


def check_fits(
    shape: Shape,
    dtype: torch.dtype,
    batch: int,
    prompt: int,
    new: int,
    total_bytes: float | None,
    logits_positions: int = 1,
) -> None:
    """Refuses, before anything is allocated, a batch whose KV cache and prefill logits alone
    (memory_plan's per-sequence need) exceed all of the device's memory."""
    kv = (prompt + new) * shape.kv_bytes_per_token(dtype)
    per_sequence = kv + logits_positions * shape.vocab_size * dtype.itemsize
    if total_bytes is None or batch * per_sequence <= total_bytes:
        return
    raise ConfigError(
        "batch_size",
        f"{batch} sequences of {prompt + new} tokens need {gib(batch * per_sequence)} of KV cache "
        f"and logits, more than the {gib(total_bytes)} this device has in all: give at most "
        f"{max(1, int(total_bytes // per_sequence))}, or auto",
    )


def total_memory(device: torch.device) -> float | None:
    """All of the device's memory (CUDA), or the host's RAM (CPU); None when it cannot be read."""
    if device.type == "cuda":
        return float(torch.cuda.get_device_properties(device).total_memory)
    import psutil

    try:
        return float(psutil.virtual_memory().total)
    except (OSError, RuntimeError):
        return None


def free_memory(device: torch.device) -> float | None:
    """Free device memory (CUDA), or the host's available RAM (CPU)."""
    if device.type == "cuda":
        return float(torch.cuda.mem_get_info(device)[0])
    import psutil

    try:
        return float(psutil.virtual_memory().available)
    except (OSError, RuntimeError):
        return None
