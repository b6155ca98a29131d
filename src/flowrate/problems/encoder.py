"""bert-base and roberta-large: masked-language-model encoders in the BERT layout.

Word + position + token-type embeddings with a LayerNorm, post-LayerNorm layers with
bidirectional attention and a 4x GELU MLP, and the MLM head (dense + GELU + LayerNorm + a decoder
tied to the word embedding, with its own bias) producing logits at every position, as
HuggingFace's BertForMaskedLM / RobertaForMaskedLM do (Devlin et al. 2019; Liu et al. 2019).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from flowrate.errors import ConfigError
from flowrate.problems.base import Batch, Family, Problem
from flowrate.problems.sample import SampleField, token_dtype
from flowrate.problems.transformer import (
    MLP,
    TORCH_TOKEN_DTYPES,
    SelfAttention,
    layer_flops_per_token,
    layer_parameters,
    learnable_tokens,
    synthetic_tokens,
)

# BERT's masking recipe: 15% of positions are predicted; of those 80% become the mask token,
# 10% a random token and 10% stay unchanged.
MASK_FRACTION = 0.15
IGNORE = -100  # label of positions that are not predicted (cross_entropy's ignore_index)


@dataclass(frozen=True)
class EncoderConfig:
    layers: int
    heads: int
    hidden: int
    vocab_size: int
    # Rows of the position table.
    max_positions: int
    # Segment vocabulary: 2 for BERT (sentence A/B), 1 for RoBERTa.
    type_vocab_size: int
    # Id of the mask token ([MASK] = 103 in BERT's vocabulary, <mask> = 50264 in RoBERTa's).
    mask_token_id: int
    # First position id: RoBERTa starts at padding_idx + 1 = 2, so it fits 512 tokens in 514 rows.
    position_offset: int = 0
    layer_norm_eps: float = 1e-12
    # Tokens per sample.
    seq_len: int = 128
    # Batch size used when the user gives none.
    default_batch_size: int = 8

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        for field in ("layers", "heads", "hidden", "vocab_size", "max_positions", "seq_len"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(field, f"must be a positive integer, got {value!r}")
        if self.hidden % self.heads:
            raise ConfigError("heads", f"must divide hidden ({self.hidden}); got {self.heads} heads")
        longest = self.max_positions - self.position_offset
        if self.seq_len > longest:
            raise ConfigError(
                "seq_len",
                f"this encoder takes at most {longest} tokens "
                f"(its position table has {self.max_positions} rows); got {self.seq_len}",
            )
        if not 0 <= self.mask_token_id < self.vocab_size:
            raise ConfigError("mask_token_id", f"must be below vocab_size ({self.vocab_size})")


class EncoderEmbeddings(nn.Module):
    """Token ids (B, T) -> LayerNorm(word + position + token type) (B, T, C)."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.offset = config.position_offset
        self.word = nn.Embedding(config.vocab_size, config.hidden)
        self.position = nn.Embedding(config.max_positions, config.hidden)
        self.token_type = nn.Embedding(config.type_vocab_size, config.hidden)
        self.ln = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = self.offset + torch.arange(ids.shape[1], device=ids.device)  # (T,)
        types = torch.zeros_like(ids)  # (B, T): one segment, as HuggingFace defaults to
        x = self.word(ids) + self.position(positions) + self.token_type(types)
        return self.ln(x)  # (B, T, C)


class EncoderLayer(nn.Module):
    """Post-LayerNorm layer with bidirectional attention: (B, T, C) -> (B, T, C)."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.attention = SelfAttention(config.hidden, config.heads, causal=False)
        self.ln1 = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.mlp = MLP(config.hidden, gelu_approximate="none")
        self.ln2 = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + self.attention(x))
        return self.ln2(x + self.mlp(x))


class MLMHead(nn.Module):
    """dense -> GELU -> LayerNorm -> tied decoder + bias: (B, T, C) -> logits (B, T, V)."""

    def __init__(self, config: EncoderConfig, embeddings: EncoderEmbeddings) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden, config.hidden)
        self.ln = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        # Tied decoder weight: a plain tuple, so the word embedding stays registered in the
        # embeddings block only (one Parameter, counted once, streamed with that block).
        self._tied = (embeddings,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln(F.gelu(self.dense(x)))  # (B, T, C)
        return F.linear(x, self._tied[0].word.weight, self.bias)  # (B, T, V)


class Encoder(nn.Module):
    """blocks = [embeddings, layer_0 … layer_{L-1}, MLM head]; each block's output is the next
    one's only input: ids (B, T) -> (B, T, C) -> … -> (B, T, C) -> logits (B, T, V)."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        embeddings = EncoderEmbeddings(config)
        self.blocks = nn.ModuleList(
            [
                embeddings,
                *(EncoderLayer(config) for _ in range(config.layers)),
                MLMHead(config, embeddings),
            ]
        )
        # BERT initialisation: N(0, 0.02) weights, zero biases, LayerNorms at (1, 0).
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = ids  # (B, T) token ids
        for block in self.blocks:
            x = block(x)
        return x  # (B, T, V)


class MaskedLM(Problem):
    def __init__(self, config: EncoderConfig, name: str) -> None:
        self.config = config
        self.name = name
        self.default_batch_size = config.default_batch_size

    def build_model(self) -> nn.Module:
        return Encoder(self.config)

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        c = self.config
        tokens = synthetic_tokens((batch_size, c.seq_len), c.vocab_size, device, generator)  # (B, T)
        return self._masked(tokens, generator)

    def learnable_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        """A bigram-then-copy language over at most 64 tokens, masked as BERT does; loss floor ≈ 0.1.

        Each sequence is a bigram walk followed by a copy of it (see
        transformer.learnable_tokens), so a masked token is given away by its twin half a
        sequence away, and failing that (the twin masked or replaced, ≈ 14%) narrowed to its
        2 possible successors by the token before: the mean loss over the predicted positions
        can fall to ≈ 0.14·ln 2 ≈ 0.1, from ≈ ln(V) at initialisation.
        """
        c = self.config
        tokens = learnable_tokens(batch_size, c.seq_len, c.vocab_size, device, generator)  # (B, T)
        return self._masked(tokens, generator)

    def _masked(self, tokens: torch.Tensor, generator: torch.Generator) -> Batch:
        """BERT's masking of ``tokens`` (B, T): (ids, labels)."""
        c = self.config
        shape = tokens.shape
        device = tokens.device
        masked = torch.rand(shape, device=device, generator=generator) < MASK_FRACTION
        # At least one predicted position per sample, so the mean loss is never 0/0.
        forced = torch.randint(0, c.seq_len, (shape[0], 1), device=device, generator=generator)
        masked.scatter_(1, forced, torch.ones_like(forced, dtype=torch.bool))
        labels = torch.where(masked, tokens, IGNORE)  # (B, T)
        choice = torch.rand(shape, device=device, generator=generator)
        randoms = torch.randint(0, c.vocab_size, shape, device=device, generator=generator)
        ids = torch.where(masked & (choice < 0.8), c.mask_token_id, tokens)
        ids = torch.where(masked & (choice >= 0.8) & (choice < 0.9), randoms, ids)
        return ids, labels

    def sample_spec(self) -> tuple[SampleField, ...]:
        # Unmasked token windows: the mask is drawn per batch on the device (dynamic masking, as
        # RoBERTa does), so every epoch predicts different positions.
        c = self.config
        return (SampleField("tokens", (c.seq_len,), token_dtype(c.vocab_size), high=c.vocab_size),)

    def samples_from_batch(self, batch: Batch) -> dict[str, torch.Tensor]:
        ids, labels = batch
        tokens = torch.where(labels == IGNORE, ids, labels)  # a masked position's label is its token
        return {"tokens": tokens.to(TORCH_TOKEN_DTYPES[token_dtype(self.config.vocab_size)])}

    def batch_from_samples(self, samples: Mapping[str, torch.Tensor], generator: torch.Generator) -> Batch:
        return self._masked(samples["tokens"].long(), generator)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        ids, labels = batch
        logits = model(ids)  # (B, T, V)
        return F.cross_entropy(
            logits.float().flatten(0, 1), labels.flatten(), ignore_index=IGNORE
        )  # mean over the predicted positions

    def parameter_count(self) -> int:
        c = self.config
        h = c.hidden
        embeddings = (c.vocab_size + c.max_positions + c.type_vocab_size) * h + 2 * h
        head = (h * h + h) + 2 * h + c.vocab_size  # dense, LayerNorm, decoder bias (tied weight)
        return embeddings + c.layers * layer_parameters(h) + head

    def forward_flops_per_sample(self) -> int:
        # Per token: L·(24·h² + 4·T·h) for the layers (see transformer.layer_flops_per_token;
        # attention over the full T x T, as it is bidirectional), plus the MLM head's dense
        # 2·h² and decoder 2·h·V at every position; embedding lookups cost 0.
        c = self.config
        h = c.hidden
        per_token = c.layers * layer_flops_per_token(h, c.seq_len) + 2 * h * h + 2 * h * c.vocab_size
        return c.seq_len * per_token

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
            "max_positions": c.max_positions,
        }


BERT_BASE = EncoderConfig(
    layers=12,
    heads=12,
    hidden=768,
    vocab_size=30522,
    max_positions=512,
    type_vocab_size=2,
    mask_token_id=103,
)
ROBERTA_LARGE = EncoderConfig(
    layers=24,
    heads=16,
    hidden=1024,
    vocab_size=50265,
    max_positions=514,
    type_vocab_size=1,
    mask_token_id=50264,
    position_offset=2,
    layer_norm_eps=1e-5,
)


def _debug(config: EncoderConfig, mask_token_id: int) -> EncoderConfig:
    """The tiny size tests use: the family's layout with 2 layers of width 64."""
    return EncoderConfig(
        layers=2,
        heads=2,
        hidden=64,
        vocab_size=512,
        max_positions=64,
        type_vocab_size=config.type_vocab_size,
        mask_token_id=mask_token_id,
        position_offset=config.position_offset,
        layer_norm_eps=config.layer_norm_eps,
        seq_len=32,
        default_batch_size=4,
    )


FAMILIES: tuple[Family, ...] = (
    Family(
        name="bert-base",
        summary="BERT-base masked-LM encoder (post-LN, tied MLM decoder)",
        sizes={"default": BERT_BASE, "debug": _debug(BERT_BASE, mask_token_id=103)},
        default_size="default",
        build=lambda config: MaskedLM(config, "bert-base"),
        options=("seq_len",),
        sample_shape_option="seq_len",
    ),
    Family(
        name="roberta-large",
        summary="RoBERTa-large masked-LM encoder (post-LN, tied MLM decoder)",
        sizes={"default": ROBERTA_LARGE, "debug": _debug(ROBERTA_LARGE, mask_token_id=511)},
        default_size="default",
        build=lambda config: MaskedLM(config, "roberta-large"),
        options=("seq_len",),
        sample_shape_option="seq_len",
    ),
)
