"""Text tasks of hf: models: causal LM, masked LM, seq2seq LM, sequence classification.

Inputs follow the zoo's: token ids over the whole vocabulary (transformer.synthetic_tokens) with
an all-ones attention mask (full windows, as packed pretraining data is); labels in range. The
loss is cross-entropy on the model's logits in fp32, computed here as the zoo does.

Model FLOPs per sample (one multiply-add = 2 FLOPs), the standard formula (Kaplan et al. 2020;
PaLM, Chowdhery et al. 2022, appendix B): per token 2·N for the matmuls, N = the weights of the
model's linear layers (attention, MLP and the LM head, tied or not; not the embedding lookups,
norms or biases), plus per layer 4·d·K for attention scores and the weighted sum of values
(d = heads x head dim, K = keys each query sees). Training is 3 x forward: 6·N + the attention
term per token. The causal discount: a causal query sees about half the keys (the half of the
T x T square a causal kernel computes: exactly K = (T + 1)/2, query i seeing keys 0..i); with a
sliding window w < T query i sees min(i + 1, w); a bidirectional encoder sees K = T.
Classification heads that read one pooled token (BERT's pooler and classifier) count once per
sample, not per token.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from flowrate.errors import ConfigError
from flowrate.problems.base import Batch, Problem
from flowrate.problems.sample import SampleField, token_dtype
from flowrate.problems.sources import hf_model, loader
from flowrate.problems.transformer import TORCH_TOKEN_DTYPES, learnable_tokens, synthetic_tokens

IGNORE = -100  # label of positions without a loss (transformers' and PyTorch's ignore_index)
MASK_FRACTION = 0.15  # BERT's: 15% of positions predicted, 80% of them [MASK], 10% random, 10% kept
DEFAULT_SEQ_LEN = {"debug": 32}  # else 128
TRACE_TOKENS = 8  # tokens per sample of the meta-device forward that finds the blocks' order


class HFText(Problem):
    """A transformers text model on synthetic tokens; subclasses give the task's batch and loss."""

    task = "text"
    causal = False

    def __init__(
        self,
        name: str,
        size: str,
        config: Any,
        model_class: Any,
        seq_len: int | None,
        weights: Path | None,
        mask_token_id: int | None,
    ) -> None:
        self.name, self.size, self.config = name, size, config
        self.model_class, self.weights = model_class, weights
        self.vocab_size = int(config.vocab_size)
        self.seq_len = seq_len or DEFAULT_SEQ_LEN.get(size.partition("+")[0], 128)
        self.mask_token_id = mask_token_id if mask_token_id is not None else self.vocab_size - 1
        self.default_batch_size = 4 if size.startswith("debug") else 8
        if self.vocab_size < 1:  # raised for loader.build to name the value
            raise ValueError(
                f"vocab_size must be at least 1 (tokens are drawn below it), not {self.vocab_size}"
            )
        limit = _position_limit(self._meta)
        if limit is not None and self.seq_len > limit:
            raise ConfigError(
                "seq_len", f"{name} has {limit} learned positions; got --seq-len {self.seq_len}"
            )
        self._check_forward()
        if weights is not None:
            loader.check_weights(weights, self._meta)

    def build_model(self) -> nn.Module:
        if self.weights is not None:
            with loader.reading_weights(self.weights):
                return self.model_class.from_pretrained(
                    str(self.weights),
                    config=self.config,
                    local_files_only=True,
                    dtype=torch.float32,
                    attn_implementation="sdpa",
                )
        return self._from_config()

    def _from_config(self) -> nn.Module:
        return self.model_class._from_config(self.config, dtype=torch.float32, attn_implementation="sdpa")

    @functools.cached_property
    def _meta(self) -> nn.Module:
        return hf_model.meta_model(self._from_config)

    def _check_forward(self) -> None:
        """A forward on the meta device, where the config's late errors (shapes that do not fit
        together, a negative layer count) show without allocating; a model whose forward the
        meta device cannot run passes."""
        ids = torch.zeros((1, min(self.seq_len, TRACE_TOKENS)), dtype=torch.long, device="meta")
        try:
            self.logits(self._meta, ids, None, ids)
        except Exception as error:
            if not hf_model.beyond_meta(error):
                raise

    @functools.cached_property
    def _order(self) -> list[str] | None:
        names = [name for name, _ in hf_model.candidate_blocks(self._meta)]
        ids = torch.zeros((1, min(self.seq_len, TRACE_TOKENS)), dtype=torch.long, device="meta")
        try:
            return hf_model.called_order(self._meta, names, lambda m: self.logits(m, ids, None, ids))
        except Exception:
            return None

    def parameter_count(self) -> int:
        return hf_model.parameter_count(self._meta)

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return hf_model.blocks_in_order(model, self._order)

    def tied_parameters(self, model: nn.Module) -> dict[int, list[nn.Parameter]]:
        return hf_model.tied_by_block(self.blocks(model))

    def logits(
        self, model: nn.Module, ids: torch.Tensor, mask: torch.Tensor | None, labels: torch.Tensor
    ) -> Any:
        return model(input_ids=ids, attention_mask=mask).logits

    @property
    def tokens_per_sample(self) -> int:
        return self.seq_len

    # --- FLOPs (see the module docstring) ---

    def _dims(self) -> tuple[int, int]:
        """(layers, d): decoder or encoder layers, and attention width heads x head dim."""
        c = self.config
        heads = int(c.num_attention_heads)
        head_dim = getattr(c, "head_dim", None) or getattr(c, "d_kv", None) or int(c.hidden_size) // heads
        return int(c.num_hidden_layers), heads * int(head_dim)

    def _keys(self) -> float:
        """Keys each query sees on average (the causal discount, sliding windows)."""
        t = self.seq_len
        if not self.causal:
            return float(t)
        window = (
            getattr(self.config, "sliding_window", None)
            if getattr(self.config, "use_sliding_window", True)
            else None
        )
        if window is not None and window < t:  # query i sees min(i + 1, w) keys
            return (window * (window + 1) / 2 + (t - window) * window) / t
        return (t + 1) / 2  # query i sees keys 0..i

    def forward_flops_per_sample(self) -> int:
        layers, d = self._dims()
        per_token = 2 * hf_model.matmul_weights(self._meta) + layers * 4 * d * self._keys()
        return round(self.seq_len * per_token)

    def describe(self) -> dict[str, Any]:
        c = self.config
        layers, d = self._dims()
        shape = {"model_type": c.model_type, "task": self.task, "layers": layers, "attention_width": d}
        shape.update({"hidden": getattr(c, "hidden_size", None), "heads": c.num_attention_heads})
        if getattr(c, "num_key_value_heads", None):
            shape["kv_heads"] = c.num_key_value_heads
        return {**shape, "seq_len": self.seq_len, "vocab_size": self.vocab_size}

    def _tokens(
        self, batch_size: int, length: int, device: torch.device, generator: torch.Generator
    ) -> torch.Tensor:
        return synthetic_tokens((batch_size, length), self.vocab_size, device, generator)

    def _learnable(
        self, batch_size: int, length: int, device: torch.device, generator: torch.Generator
    ) -> torch.Tensor:
        return learnable_tokens(batch_size, length, self.vocab_size, device, generator)

    def _stored(self, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"tokens": tokens.to(TORCH_TOKEN_DTYPES[token_dtype(self.vocab_size)])}


class CausalLM(HFText):
    """Next-token prediction: (ids, mask, targets), targets the ids shifted by one."""

    task = "causal-lm"
    causal = True

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        return self._split(self._tokens(batch_size, self.seq_len + 1, device, generator))

    def learnable_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        """The zoo transformer's bigram-then-copy language (loss floor ≈ ln(2)/2)."""
        return self._split(self._learnable(batch_size, self.seq_len + 1, device, generator))

    @staticmethod
    def _split(tokens: torch.Tensor) -> Batch:
        ids = tokens[:, :-1]
        return ids, torch.ones_like(ids), tokens[:, 1:]

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        ids, mask, targets = batch
        logits = self.logits(model, ids, mask, targets)  # (B, T, V)
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())

    def sample_spec(self) -> tuple[SampleField, ...]:
        return (
            SampleField("tokens", (self.seq_len + 1,), token_dtype(self.vocab_size), high=self.vocab_size),
        )

    def samples_from_batch(self, batch: Batch) -> dict[str, torch.Tensor]:
        ids, _, targets = batch
        return self._stored(torch.cat([ids, targets[:, -1:]], dim=1))

    def batch_from_samples(self, samples: Mapping[str, torch.Tensor], generator: torch.Generator) -> Batch:
        return self._split(samples["tokens"].long())


class MaskedLM(HFText):
    """BERT's masked LM: (ids, mask, labels), labels IGNORE where nothing is predicted."""

    task = "masked-lm"

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        return self._masked(self._tokens(batch_size, self.seq_len, device, generator), generator)

    def learnable_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        """The bigram-then-copy language, masked: a masked token's twin gives it away."""
        return self._masked(self._learnable(batch_size, self.seq_len, device, generator), generator)

    def _masked(self, tokens: torch.Tensor, generator: torch.Generator) -> Batch:
        shape, device = tokens.shape, tokens.device
        masked = torch.rand(shape, device=device, generator=generator) < MASK_FRACTION
        forced = torch.randint(0, shape[1], (shape[0], 1), device=device, generator=generator)
        masked.scatter_(1, forced, torch.ones_like(forced, dtype=torch.bool))  # ≥ 1 prediction per sample
        choice = torch.rand(shape, device=device, generator=generator)
        randoms = torch.randint(0, self.vocab_size, shape, device=device, generator=generator)
        ids = torch.where(masked & (choice < 0.8), self.mask_token_id, tokens)
        ids = torch.where(masked & (choice >= 0.8) & (choice < 0.9), randoms, ids)
        return ids, torch.ones_like(ids), torch.where(masked, tokens, IGNORE)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        ids, mask, labels = batch
        logits = self.logits(model, ids, mask, labels)  # (B, T, V)
        return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=IGNORE)

    def sample_spec(self) -> tuple[SampleField, ...]:
        # unmasked windows: the mask is drawn per batch on the device (dynamic masking)
        return (SampleField("tokens", (self.seq_len,), token_dtype(self.vocab_size), high=self.vocab_size),)

    def samples_from_batch(self, batch: Batch) -> dict[str, torch.Tensor]:
        ids, _, labels = batch
        return self._stored(torch.where(labels == IGNORE, ids, labels))

    def batch_from_samples(self, samples: Mapping[str, torch.Tensor], generator: torch.Generator) -> Batch:
        return self._masked(samples["tokens"].long(), generator)


class Seq2SeqLM(HFText):
    """Encoder-decoder LM (T5): (ids, mask, labels); the decoder reads the labels shifted right.
    Encoder and decoder both take seq_len tokens."""

    task = "seq2seq"

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        ids = self._tokens(batch_size, self.seq_len, device, generator)
        return ids, torch.ones_like(ids), self._tokens(batch_size, self.seq_len, device, generator)

    def learnable_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        """Copy the input: the decoder learns to repeat the encoder's tokens."""
        ids = self._learnable(batch_size, self.seq_len, device, generator)
        return ids, torch.ones_like(ids), ids.clone()

    def logits(
        self, model: nn.Module, ids: torch.Tensor, mask: torch.Tensor | None, labels: torch.Tensor
    ) -> Any:
        start = getattr(self.config, "decoder_start_token_id", None)
        start = start if start is not None else (self.config.pad_token_id or 0)
        decoder_ids = torch.cat([torch.full_like(labels[:, :1], start), labels[:, :-1]], dim=1)
        return model(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids).logits

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        ids, mask, labels = batch
        logits = self.logits(model, ids, mask, labels)  # (B, T, V)
        return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())

    def forward_flops_per_sample(self) -> int:
        # encoder self-attention over T keys; decoder causal self-attention ((T + 1)/2 keys)
        # and cross-attention (T keys)
        enc_layers, d = self._dims()  # T5's num_hidden_layers is its encoder's
        dec_layers = int(getattr(self.config, "num_decoder_layers", None) or enc_layers)
        t = self.seq_len
        attention = enc_layers * 4 * d * t + dec_layers * 4 * d * ((t + 1) / 2 + t)
        return round(t * (2 * hf_model.matmul_weights(self._meta) + attention))


class SequenceClassification(HFText):
    """(ids, mask, labels (B,)) over config.num_labels classes; decoders read the last token,
    encoders their pooled first token."""

    task = "sequence-classification"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.causal = self.config.model_type not in _encoder_types()
        if self.config.pad_token_id is None:  # decoders find each row's last token by the pad id
            self.config.pad_token_id = self.vocab_size - 1

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        ids = self._tokens(batch_size, self.seq_len, device, generator)
        labels = torch.randint(0, self.config.num_labels, (batch_size,), device=device, generator=generator)
        return ids, torch.ones_like(ids), labels

    def learnable_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        """The class is the first token modulo the classes: every model here can see it."""
        ids = self._learnable(batch_size, self.seq_len, device, generator)
        return ids, torch.ones_like(ids), ids[:, 0] % self.config.num_labels

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        ids, mask, labels = batch
        return F.cross_entropy(self.logits(model, ids, mask, labels).float(), labels)

    def forward_flops_per_sample(self) -> int:
        if self.causal:  # the score layer runs at every position; the last one is kept
            return super().forward_flops_per_sample()
        layers, d = self._dims()
        pooled = hf_model.matmul_weights(self._meta, _pooled)
        per_token = 2 * (hf_model.matmul_weights(self._meta) - pooled) + layers * 4 * d * self.seq_len
        return self.seq_len * per_token + 2 * pooled


def _pooled(name: str) -> bool:
    return name.startswith("classifier") or ".pooler" in name or name.startswith("pooler")


@functools.lru_cache(maxsize=1)
def _encoder_types() -> frozenset[str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    return frozenset(MODEL_FOR_MASKED_LM_MAPPING_NAMES)


def _position_limit(model: nn.Module) -> int | None:
    """Tokens a model with learned absolute positions can take (RoBERTa's start after its pad id)."""
    for name, module in model.named_modules():
        if isinstance(module, nn.Embedding) and (
            name.endswith("position_embeddings") or name.endswith("wpe")
        ):
            pad = module.padding_idx
            return module.num_embeddings - (pad + 1 if pad is not None else 0)
    return None
