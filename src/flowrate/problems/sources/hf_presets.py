"""Configurations of hf: models: the tiny default per architecture, and published ones by name.

A preset is the architecture's public config.json values (the shapes that set parameters and
FLOPs; tokenizer ids where a task needs them); everything else keeps the config class's
default. The weights stay random: flowrate never downloads anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

# The default size: small enough that a CPU step takes milliseconds. Applied to whichever of
# these attributes the architecture's config has (so it also covers types not listed here);
# an architecture may add its own below (TINY_BY_TYPE).
TINY: MappingProxyType[str, Any] = MappingProxyType(
    {
        "vocab_size": 512,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
    }
)
TINY_BY_TYPE: MappingProxyType[str, dict[str, Any]] = MappingProxyType(
    {
        # names GPT-2 keeps without an alias
        "gpt2": {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 512, "n_inner": 128},
        "t5": {
            "d_model": 64,
            "d_kv": 16,
            "d_ff": 128,
            "num_layers": 2,
            "num_decoder_layers": 2,
            "num_heads": 4,
        },
        "vit": {"image_size": 32, "patch_size": 8, "num_labels": 10},
        "roberta": {"max_position_embeddings": 514},  # RoBERTa's positions start after the pad id
    }
)


@dataclass(frozen=True)
class Preset:
    """A published architecture: its model type, its config.json values, and where they are from."""

    model_type: str
    values: MappingProxyType[str, Any]
    source: str  # the config.json the values are copied from


def _preset(model_type: str, source: str, **values: Any) -> Preset:
    return Preset(model_type, MappingProxyType(values), source)


_LLAMA3_ROPE = {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0}
_LLAMA3_ROPE_COMMON = {"original_max_position_embeddings": 8192, "rope_type": "llama3"}

# Each entry's values are copied from the config.json at its URL (the model's hub page, files tab).
PRESETS: MappingProxyType[str, Preset] = MappingProxyType(
    {
        "llama-3.2-1b": _preset(
            "llama",
            "https://huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json",
            vocab_size=128256,
            hidden_size=2048,
            intermediate_size=8192,
            num_hidden_layers=16,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=64,
            max_position_embeddings=131072,
            rms_norm_eps=1e-5,
            rope_theta=500000.0,
            rope_scaling={**_LLAMA3_ROPE, **_LLAMA3_ROPE_COMMON},
            tie_word_embeddings=True,
            bos_token_id=128000,
            eos_token_id=128001,
        ),
        "llama-3.1-8b": _preset(
            "llama",
            "https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json",
            vocab_size=128256,
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            max_position_embeddings=131072,
            rms_norm_eps=1e-5,
            rope_theta=500000.0,
            rope_scaling={**_LLAMA3_ROPE, "factor": 8.0, **_LLAMA3_ROPE_COMMON},
            tie_word_embeddings=False,
            bos_token_id=128000,
            eos_token_id=128001,
        ),
        "qwen2.5-0.5b": _preset(
            "qwen2",
            "https://huggingface.co/Qwen/Qwen2.5-0.5B/blob/main/config.json",
            vocab_size=151936,
            hidden_size=896,
            intermediate_size=4864,
            num_hidden_layers=24,
            num_attention_heads=14,
            num_key_value_heads=2,
            max_position_embeddings=32768,
            rms_norm_eps=1e-6,
            rope_theta=1000000.0,
            sliding_window=32768,
            use_sliding_window=False,
            max_window_layers=24,
            tie_word_embeddings=True,
            bos_token_id=151643,
            eos_token_id=151643,
        ),
        "mistral-7b": _preset(
            "mistral",
            "https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json",
            vocab_size=32000,
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            max_position_embeddings=32768,
            rms_norm_eps=1e-5,
            rope_theta=10000.0,
            sliding_window=4096,
            tie_word_embeddings=False,
            bos_token_id=1,
            eos_token_id=2,
        ),
        "gpt2": _preset(
            "gpt2",
            "https://huggingface.co/openai-community/gpt2/blob/main/config.json",
            vocab_size=50257,
            n_embd=768,
            n_layer=12,
            n_head=12,
            n_positions=1024,
            n_inner=None,  # 4 x n_embd
        ),
        "bert-base-uncased": _preset(
            "bert",
            "https://huggingface.co/google-bert/bert-base-uncased/blob/main/config.json",
            vocab_size=30522,
            hidden_size=768,
            intermediate_size=3072,
            num_hidden_layers=12,
            num_attention_heads=12,
            max_position_embeddings=512,
            type_vocab_size=2,
            layer_norm_eps=1e-12,
            pad_token_id=0,
        ),
        "roberta-large": _preset(
            "roberta",
            "https://huggingface.co/FacebookAI/roberta-large/blob/main/config.json",
            vocab_size=50265,
            hidden_size=1024,
            intermediate_size=4096,
            num_hidden_layers=24,
            num_attention_heads=16,
            max_position_embeddings=514,
            type_vocab_size=1,
            layer_norm_eps=1e-5,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
        ),
        "t5-small": _preset(
            "t5",
            "https://huggingface.co/google-t5/t5-small/blob/main/config.json",
            vocab_size=32128,
            d_model=512,
            d_kv=64,
            d_ff=2048,
            num_layers=6,
            num_heads=8,
            relative_attention_num_buckets=32,
            feed_forward_proj="relu",
        ),
        "vit-base-patch16-224": _preset(
            "vit",
            "https://huggingface.co/google/vit-base-patch16-224/blob/main/config.json",
            hidden_size=768,
            intermediate_size=3072,
            num_hidden_layers=12,
            num_attention_heads=12,
            image_size=224,
            patch_size=16,
            num_channels=3,
            layer_norm_eps=1e-12,
            qkv_bias=True,
            num_labels=1000,  # its id2label has the 1000 ImageNet-1k classes
        ),
    }
)

# Token ids some tasks need that config.json does not hold (they are the tokenizer's):
# [MASK] of BERT's uncased WordPiece vocabulary and <mask> of RoBERTa's BPE.
MASK_TOKEN_IDS: MappingProxyType[str, int] = MappingProxyType(
    {"bert-base-uncased": 103, "roberta-large": 50264}
)


def tiny_values(model_type: str, has: Any) -> dict[str, Any]:
    """The tiny default's values that apply to a config with these attributes (``has(name)``)."""
    values = {k: v for k, v in TINY.items() if has(k)}
    values.update(TINY_BY_TYPE.get(model_type, {}))
    return values
