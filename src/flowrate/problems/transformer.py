"""transformer: a GPT-2-style decoder-only language model, from a debug size to 6.7B parameters.

Learned token and position embeddings, pre-LayerNorm blocks with biases, causal attention through
``scaled_dot_product_attention``, a 4x GELU MLP, a final LayerNorm and an LM head tied to the
token embedding (Radford et al. 2019; sizes from Brown et al. 2020, table 2.1).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from flowrate.errors import ConfigError
from flowrate.problems.base import Batch, Family, Problem
from flowrate.problems.sample import SampleField, token_dtype


@dataclass(frozen=True)
class TransformerConfig:
    # Transformer blocks.
    layers: int
    # Attention heads; must divide hidden.
    heads: int
    # Model width (embedding size).
    hidden: int
    # Tokens per sample; the position table has exactly this many rows.
    seq_len: int
    # Token vocabulary size (50257 for GPT-2's BPE).
    vocab_size: int
    # Batch size used when the user gives none.
    default_batch_size: int = 8

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        for field in ("layers", "heads", "hidden", "seq_len", "vocab_size"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(field, f"must be a positive integer, got {value!r}")
        if self.hidden % self.heads:
            raise ConfigError("heads", f"must divide hidden ({self.hidden}); got {self.heads} heads")


def layer_parameters(hidden: int) -> int:
    """Parameters of one transformer layer with biases and two LayerNorms: 12·h² + 13·h."""
    h = hidden
    attention = (3 * h * h + 3 * h) + (h * h + h)  # fused q,k,v + output projection
    mlp = (4 * h * h + 4 * h) + (4 * h * h + h)  # h -> 4h -> h
    return attention + mlp + 2 * (2 * h)  # + two LayerNorms (weight and bias)


def layer_flops_per_token(hidden: int, seq_len: int) -> int:
    """Forward FLOPs of one layer per token: 24·h² + 4·T·h.

    24·h²: the q,k,v (6h²), output (2h²) and MLP (16h²) matmuls at 2 FLOPs per multiply-add,
    i.e. 2 FLOPs per non-embedding parameter (Kaplan et al. 2020, table 1).
    4·T·h: attention scores Q·Kᵀ (2·T·h) and the weighted sum of values (2·T·h) over the full
    T x T matrix (PaLM, Chowdhery et al. 2022, appendix B: 12·L·H·Q·T per token for training is
    3 x this). The causal mask is not subtracted (PaLM's convention, which MFU figures quoted
    for GPT-style models follow); the executed count keeps only the pairs the mask keeps, and
    the agreement check allows for that (flowrate.measure.flops).
    """
    return 24 * hidden * hidden + 4 * seq_len * hidden


def synthetic_tokens(
    shape: tuple[int, ...], vocab_size: int, device: torch.device, generator: torch.Generator
) -> torch.Tensor:
    """Token ids over the whole vocabulary: half Zipf-like, half uniform.

    The Zipf half is id = ⌊V^u⌋ - 1 with u uniform in [0, 1), so P(id) ∝ 1/(id + 1) (exponent 1,
    like word frequencies; BPE ids are roughly ordered by frequency). The uniform half reaches the
    rare ids so every row of the embedding and the LM head sees traffic.
    """
    u = torch.rand(shape, device=device, generator=generator)
    zipf = torch.pow(float(vocab_size), u).long() - 1
    uniform = torch.randint(0, vocab_size, shape, device=device, generator=generator)
    pick_zipf = torch.rand(shape, device=device, generator=generator) < 0.5
    return torch.where(pick_zipf, zipf, uniform).clamp_(0, vocab_size - 1)


# Stored token dtypes (see flowrate.problems.sample.token_dtype).
TORCH_TOKEN_DTYPES = {"uint16": torch.uint16, "uint32": torch.uint32}


# The learnable language of `flowrate check` (see learnable_tokens).
# Tokens it uses: the first LEARNABLE_VOCAB ids (all of them for smaller vocabularies), few
# enough that a small model sees every token's successors many times within a few hundred steps.
LEARNABLE_VOCAB = 64
# Successors each token may have: the n-gram half's loss floor is ln(LEARNABLE_BRANCHING).
LEARNABLE_BRANCHING = 2
# Seed of the fixed transition table: apart from the run's seed, so every batch and every run
# speaks the same language.
LEARNABLE_TABLE_SEED = 0x5EED


@functools.lru_cache(maxsize=8)
def _successor_table(vocab: int, branching: int, device: torch.device) -> torch.Tensor:
    """(vocab, branching): the distinct tokens that may follow each token, fixed for good."""
    generator = torch.Generator().manual_seed(LEARNABLE_TABLE_SEED)
    order = torch.rand((vocab, vocab), generator=generator).argsort(dim=1)  # a permutation per row
    return order[:, :branching].to(device)


def learnable_tokens(
    batch_size: int, length: int, vocab_size: int, device: torch.device, generator: torch.Generator
) -> torch.Tensor:
    """(B, length) token ids of a language a model can learn: an n-gram half, then a copy.

    The first ⌈length/2⌉ tokens are a walk through a fixed bigram table (each token is followed
    by one of LEARNABLE_BRANCHING fixed successors, uniformly), so a token is predictable from
    the one before up to ln(LEARNABLE_BRANCHING) nats. The last ⌊length/2⌋ tokens repeat the
    first ones, so they are predictable exactly by attending ⌈length/2⌉ positions back.
    """
    vocab = min(vocab_size, LEARNABLE_VOCAB)
    branching = min(LEARNABLE_BRANCHING, vocab)
    table = _successor_table(vocab, branching, device)
    walk = length - length // 2
    choices = torch.randint(0, branching, (batch_size, walk), device=device, generator=generator)
    tokens = torch.empty((batch_size, walk), dtype=torch.long, device=device)
    tokens[:, 0] = torch.randint(0, vocab, (batch_size,), device=device, generator=generator)
    for t in range(1, walk):  # a Markov chain is sequential; one gather per position
        tokens[:, t] = table[tokens[:, t - 1], choices[:, t]]
    return torch.cat([tokens, tokens[:, : length // 2]], dim=1)


class SelfAttention(nn.Module):
    """Multi-head self-attention: (B, T, C) -> (B, T, C); causal or bidirectional."""

    def __init__(self, hidden: int, heads: int, causal: bool) -> None:
        super().__init__()
        self.heads = heads
        self.causal = causal
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)  # 3 x (B, T, C)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)  # (B, nh, T, hd)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return self.proj(y)

    def cached(self, x: torch.Tensor, cache: KVCache, layer: int) -> torch.Tensor:
        """forward() for generation: x (B, T, C) are positions cache.length … cache.length + T - 1;
        their keys and values are written into the cache and the queries attend to all before them."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        start, end = cache.length, cache.length + T
        keys, values = cache.keys[layer], cache.values[layer]
        keys[:, :, start:end], values[:, :, start:end] = k, v
        mask = None  # one new token sees every cached key; a prompt from 0 is plain causal
        if T > 1 and start > 0:  # SDPA's is_causal aligns to the top left: spell the mask out
            mask = torch.arange(end, device=x.device) <= torch.arange(start, end, device=x.device)[:, None]
        y = F.scaled_dot_product_attention(
            q, keys[:, :, :end], values[:, :, :end], attn_mask=mask, is_causal=T > 1 and start == 0
        )
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    """(B, T, C) -> (B, T, 4C) -> GELU -> (B, T, C)."""

    def __init__(self, hidden: int, gelu_approximate: str) -> None:
        super().__init__()
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.gelu = nn.GELU(approximate=gelu_approximate)
        self.proj = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.gelu(self.fc(x)))


class Embeddings(nn.Module):
    """Token ids (B, T) -> token + position embeddings (B, T, C)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.token = nn.Embedding(config.vocab_size, config.hidden)
        self.position = nn.Embedding(config.seq_len, config.hidden)

    def forward(self, ids: torch.Tensor, start: int = 0) -> torch.Tensor:
        positions = torch.arange(start, start + ids.shape[1], device=ids.device)  # (T,)
        return self.token(ids) + self.position(positions)  # (B, T, C)


class Block(nn.Module):
    """Pre-LayerNorm transformer block: (B, T, C) -> (B, T, C)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(config.hidden)
        self.attention = SelfAttention(config.hidden, config.heads, causal=True)
        self.ln2 = nn.LayerNorm(config.hidden)
        self.mlp = MLP(config.hidden, gelu_approximate="tanh")  # GPT-2's "gelu_new"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln1(x))
        return x + self.mlp(self.ln2(x))

    def cached(self, x: torch.Tensor, cache: KVCache, layer: int) -> torch.Tensor:
        x = x + self.attention.cached(self.ln1(x), cache, layer)
        return x + self.mlp(self.ln2(x))


class LMHead(nn.Module):
    """Final LayerNorm and the tied output projection: (B, T, C) -> logits (B, T, V)."""

    def __init__(self, hidden: int, embeddings: Embeddings) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(hidden)
        # Tied weights: a plain tuple, so the token embedding stays registered in the
        # embeddings block only (one Parameter, counted once, streamed with that block).
        self._tied = (embeddings,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(self.ln(x), self._tied[0].token.weight)  # (B, T, V)


class GPT(nn.Module):
    """blocks = [embeddings, block_0 … block_{L-1}, head]; each block's output is the next one's
    only input: ids (B, T) -> (B, T, C) -> … -> (B, T, C) -> logits (B, T, V)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        embeddings = Embeddings(config)
        self.blocks = nn.ModuleList(
            [
                embeddings,
                *(Block(config) for _ in range(config.layers)),
                LMHead(config.hidden, embeddings),
            ]
        )
        # GPT-2 initialisation: N(0, 0.02) everywhere, residual projections scaled by
        # 1/√(2L) (one per residual add), zero biases, LayerNorms at (1, 0).
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear):
                std = 0.02 / math.sqrt(2 * config.layers) if name.endswith("proj") else 0.02
                nn.init.normal_(module.weight, mean=0.0, std=std)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = ids  # (B, T) token ids
        for block in self.blocks:
            x = block(x)
        return x  # (B, T, V)

    def cached(self, ids: torch.Tensor, cache: KVCache, last_only: bool = False) -> torch.Tensor:
        """Logits (B, T, V) of ids (B, T) that continue the cached sequence; the cache grows by T.
        ``last_only``: the last position's logits alone (B, 1, V), all a sampler needs, as
        transformers' generate() and serving engines compute them."""
        embeddings, layers, head = self._parts()
        x = embeddings(ids, start=cache.length)
        for index, block in enumerate(layers):
            x = block.cached(x, cache, index)
        cache.length += ids.shape[1]
        return head(x[:, -1:] if last_only else x)

    def new_cache(self, batch_size: int, max_len: int, dtype: torch.dtype | None = None) -> KVCache:
        """An empty cache for batch_size sequences of up to max_len positions (≤ the position table)."""
        embeddings, layers, _ = self._parts()
        limit = embeddings.position.num_embeddings
        if max_len > limit:
            raise ConfigError("new_tokens", f"prompt + new tokens = {max_len} exceed the context of {limit}")
        attention = layers[0].attention
        weight = attention.qkv.weight
        head_dim = weight.shape[1] // attention.heads
        shape = (batch_size, attention.heads, max_len, head_dim)
        make = functools.partial(torch.empty, shape, dtype=dtype or weight.dtype, device=weight.device)
        return KVCache([make() for _ in layers], [make() for _ in layers])

    def _parts(self) -> tuple[Embeddings, list[Block], LMHead]:
        blocks = list(self.blocks)
        return cast(Embeddings, blocks[0]), cast(list[Block], blocks[1:-1]), cast(LMHead, blocks[-1])


@dataclass
class KVCache:
    """Keys and values of every layer, (B, heads, max_len, head_dim) each, filled up to length."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    length: int = 0

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


class TransformerLM(Problem):
    name = "transformer"

    def __init__(self, config: TransformerConfig) -> None:
        self.config = config
        self.default_batch_size = config.default_batch_size

    def build_model(self) -> nn.Module:
        return GPT(self.config)

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        c = self.config
        tokens = synthetic_tokens((batch_size, c.seq_len + 1), c.vocab_size, device, generator)
        return tokens[:, :-1], tokens[:, 1:]  # inputs (B, T), next-token targets (B, T)

    def learnable_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        """A bigram-then-copy language over at most 64 tokens; loss floor ≈ ln(2)/2 ≈ 0.35.

        The first ⌈(T+1)/2⌉ - 1 targets follow a fixed bigram table with 2 successors per token
        (ln 2 nats each); the other targets repeat earlier tokens (0 nats once the model copies),
        so the mean over all T positions can reach ln(2)·(⌈(T+1)/2⌉ - 1)/T ≈ 0.35, from ≈ ln(V)
        at initialisation. A model that has learnt the bigrams but not yet to copy sits near
        ln(2) ≈ 0.69: the debug size at batch 16 and lr 1e-3 is there by ~300 steps and, as it
        learns to copy, at ≈ 0.4 by 1000.
        """
        c = self.config
        tokens = learnable_tokens(batch_size, c.seq_len + 1, c.vocab_size, device, generator)
        return tokens[:, :-1], tokens[:, 1:]  # inputs (B, T), next-token targets (B, T)

    def sample_spec(self) -> tuple[SampleField, ...]:
        # A window of T + 1 tokens: inputs and next-token targets overlap in all but one (nanoGPT).
        c = self.config
        return (SampleField("tokens", (c.seq_len + 1,), token_dtype(c.vocab_size), high=c.vocab_size),)

    def samples_from_batch(self, batch: Batch) -> dict[str, torch.Tensor]:
        ids, targets = batch
        tokens = torch.cat([ids, targets[:, -1:]], dim=1)  # (B, T + 1)
        return {"tokens": tokens.to(TORCH_TOKEN_DTYPES[token_dtype(self.config.vocab_size)])}

    def batch_from_samples(self, samples: Mapping[str, torch.Tensor], generator: torch.Generator) -> Batch:
        tokens = samples["tokens"].long()  # (B, T + 1)
        return tokens[:, :-1], tokens[:, 1:]

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        ids, targets = batch
        logits = model(ids)  # (B, T, V)
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())

    def parameter_count(self) -> int:
        c = self.config
        embeddings = (c.vocab_size + c.seq_len) * c.hidden
        final_norm = 2 * c.hidden  # the LM head reuses the token embedding
        return embeddings + c.layers * layer_parameters(c.hidden) + final_norm

    def forward_flops_per_sample(self) -> int:
        # Per token: L·(24·h² + 4·T·h) for the layers (see layer_flops_per_token) plus 2·h·V for
        # the LM head ("de-embed", Kaplan et al. 2020, table 1); embedding lookups cost 0.
        c = self.config
        per_token = c.layers * layer_flops_per_token(c.hidden, c.seq_len)
        return c.seq_len * (per_token + 2 * c.hidden * c.vocab_size)

    @property
    def tokens_per_sample(self) -> int:
        return self.config.seq_len

    def describe(self) -> dict[str, Any]:
        c = self.config
        return {
            "layers": c.layers,
            "heads": c.heads,
            "hidden": c.hidden,
            "seq_len": c.seq_len,
            "vocab_size": c.vocab_size,
        }


GPT2_VOCAB = 50257

FAMILIES: tuple[Family, ...] = (
    Family(
        name="transformer",
        summary="GPT-2-style decoder-only language model (pre-LN, tied LM head)",
        sizes={
            "debug": TransformerConfig(2, 2, 64, 32, 512, default_batch_size=4),
            "mini": TransformerConfig(4, 4, 256, 128, 8192),
            "gpt2": TransformerConfig(12, 12, 768, 1024, GPT2_VOCAB),
            "gpt2-medium": TransformerConfig(24, 16, 1024, 1024, GPT2_VOCAB),
            "gpt2-large": TransformerConfig(36, 20, 1280, 1024, GPT2_VOCAB),
            "gpt2-xl": TransformerConfig(48, 25, 1600, 1024, GPT2_VOCAB),
            # GPT-3 XL, 2.7B and 6.7B shapes (Brown et al. 2020, table 2.1).
            "gpt-1.3b": TransformerConfig(24, 16, 2048, 2048, GPT2_VOCAB),
            "gpt-2.7b": TransformerConfig(32, 32, 2560, 2048, GPT2_VOCAB),
            "gpt-6.7b": TransformerConfig(32, 32, 4096, 2048, GPT2_VOCAB),
        },
        default_size="mini",
        build=TransformerLM,
        options=("seq_len", "layers", "heads", "hidden", "vocab_size"),
        sample_shape_option="seq_len",
    ),
)
