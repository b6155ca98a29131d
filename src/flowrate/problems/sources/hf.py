"""hf:ARCH and hf:PATH: Hugging Face transformers models with random weights, offline.

``hf:llama`` constructs the architecture's config class directly (LlamaConfig(**values)) from the
tiny default, or a published architecture's values with --preset (hf_presets.py), then the
user's --hf-config key=value overrides, each typed by the attribute's type in the config class's
defaults. ``hf:PATH`` reads a folder written by save_pretrained: its config.json, and its weights
when it has them. Nothing is downloaded: the hub is never asked.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flowrate.errors import ConfigError, FlowrateError
from flowrate.problems.base import Problem
from flowrate.problems.sources import loader
from flowrate.problems.sources.base import MissingExtra, SourceSettings
from flowrate.problems.sources.hf_presets import MASK_TOKEN_IDS, PRESETS, tiny_values

PREFIX = "hf"
EXTRA = "hf"

# The architectures flowrate's tests build; any other transformers model type with a task
# (causal LM, masked LM, seq2seq, sequence or image classification) works the same way.
TESTED = {
    "llama": "Llama decoder (RMSNorm, SwiGLU, rotary, grouped-query attention)",
    "qwen2": "Qwen2 decoder (Llama-like, q/k/v biases)",
    "mistral": "Mistral decoder (sliding-window attention)",
    "gpt2": "GPT-2 decoder (learned positions, tied head)",
    "bert": "BERT encoder, masked LM",
    "roberta": "RoBERTa encoder, masked LM",
    "t5": "T5 encoder-decoder, seq2seq LM",
    "vit": "Vision Transformer, image classification",
}
TASK_KEY = "task"  # --hf-config task=… picks the task instead of inferring it
DEFAULT_SIZE = "debug"


def build_problem(name: str, settings: SourceSettings) -> Problem:
    loader.require_name(PREFIX, name, "llama, or hf:PATH of a save_pretrained folder")
    transformers = library(f"hf:{name}")
    from huggingface_hub.errors import StrictDataclassError  # transformers' config validation

    folder = Path(name) if _is_folder(name) else None
    if folder is not None:
        _check_folder(folder)
    return loader.build(
        f"hf:{name}",
        settings.overrides,
        lambda overrides: _problem(transformers, name, dataclasses.replace(settings, overrides=overrides)),
        source=folder / "config.json" if folder is not None else None,
        errors=(StrictDataclassError,),
    )


def _problem(transformers: Any, name: str, settings: SourceSettings) -> Problem:
    """The problem of hf:NAME with these overrides: its config, and the model built on the meta
    device (which is where the library checks most values)."""
    from flowrate.problems.sources.hf_tasks import make_problem

    overrides = dict(settings.overrides)
    task = overrides.pop(TASK_KEY, None)
    if _is_folder(name):
        config = _folder_config(transformers, Path(name), overrides)
        size, weights = "folder", Path(name) if loader.weight_file(Path(name)) else None
    else:
        config, size = _arch_config(transformers, name, settings.preset, overrides)
        weights = None
    if overrides:
        size = f"{size}+custom"
    mask_id = MASK_TOKEN_IDS.get(size.partition("+")[0])
    return make_problem(
        f"hf:{name}", size, config, settings, task=task, weights=weights, mask_token_id=mask_id
    )


def list_names() -> list[tuple[str, str]]:
    rows = [(f"hf:{arch}", what) for arch, what in TESTED.items()]
    rows += [(f"hf:{p.model_type} --preset {name}", p.source) for name, p in PRESETS.items()]
    return rows


def sample_shape_option(name: str) -> str:
    """What --sample-shape sets for hf:NAME: the image side of image models, else the sequence length."""
    library(f"hf:{name}")
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES

    key = PRESETS[name.lower()].model_type if name.lower() in PRESETS else name.lower()
    return "image_size" if key in MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES else "seq_len"


def library(spec: str) -> Any:
    """The transformers package, or one line saying what to install (or what is broken)."""
    from flowrate.problems.sources.vision_source import load_torchvision

    try:
        # transformers' model classes import torchvision when it is installed: this lets one whose
        # compiled operators do not load import (one not installed is no matter)
        with contextlib.suppress(ImportError):
            load_torchvision()
        import transformers
        from transformers import AutoConfig  # noqa: F401  (its lazy imports fail here, not later)

        with _quiet_loggers("torchao", "torch.utils._pytree"):
            # transformers' model classes import its quantizers, which import torchao when it is
            # installed: torchao logs "Failed to load …/_C_*.so" for each CUDA extension a
            # CPU-only torch cannot load, and its Enums' register_constant() makes torch's pytree
            # log "… is an Enum subclass and is now natively supported …". Neither is the user's.
            import transformers.modeling_utils
    except ImportError as error:
        if (error.name or "").split(".")[0] == "transformers":
            raise MissingExtra(spec, EXTRA) from None
        raise _broken(error) from None
    except RuntimeError as error:  # a dependency that is installed but does not load
        raise _broken(error) from None
    transformers.utils.logging.disable_progress_bar()  # loading bars would break flowrate's display
    return transformers


@contextlib.contextmanager
def _quiet_loggers(*names: str) -> Iterator[None]:
    """The named loggers say only errors inside the block."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _broken(error: Exception) -> FlowrateError:
    cause = str(error).splitlines()[0] if str(error) else type(error).__name__
    if isinstance(error.__cause__, Exception):
        cause = f"{cause} ({str(error.__cause__).splitlines()[0]})"
    return FlowrateError(
        f"transformers is installed but does not load: {cause}; a package it imports (often "
        "torchvision, which must match torch) is broken: reinstall it at the README's pin, or uninstall it"
    )


def _is_folder(name: str) -> bool:
    return os.sep in name or "/" in name or name.startswith(".") or Path(name).is_dir()


def _check_folder(folder: Path) -> None:
    if not folder.is_dir():
        raise ConfigError("problem", f"hf:{folder}: no such folder (hf:PATH reads a save_pretrained folder)")
    if not (folder / "config.json").is_file():
        raise ConfigError(
            "problem", f"hf:{folder} has no config.json: give a folder written by save_pretrained, or hf:ARCH"
        )


def _folder_config(transformers: Any, folder: Path, overrides: dict[str, str]) -> Any:
    try:
        config = transformers.AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except (OSError, KeyError, json.JSONDecodeError) as error:
        raise FlowrateError(f"{folder / 'config.json'}: cannot be read: {loader.describe(error)}") from None
    defaults = type(config)()
    for key, text in overrides.items():
        setattr(config, key, typed_value(config.model_type, defaults, key, text))
    return config


def _arch_config(
    transformers: Any, arch: str, preset: str | None, overrides: dict[str, str]
) -> tuple[Any, str]:
    """The config of ``hf:arch``: the preset's values (or the tiny default), then the overrides."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    key = arch.lower()
    if key not in CONFIG_MAPPING and key in PRESETS and preset is None:  # hf:llama-3.2-1b: the preset
        key, preset = PRESETS[key].model_type, key
    if key not in CONFIG_MAPPING:
        raise ConfigError(
            "problem",
            f"hf:{arch} is no transformers architecture{_close(key, {*TESTED, *CONFIG_MAPPING.keys()})}; "
            "see `flowrate list --source hf`, or give hf:PATH of a save_pretrained folder",
        )
    config_class = CONFIG_MAPPING[key]
    defaults = config_class()
    if preset is None or preset == DEFAULT_SIZE:
        values = tiny_values(key, lambda name: hasattr(defaults, name))
        values.update(_ids_in_vocabulary(defaults, values.get("vocab_size")))
        size = DEFAULT_SIZE
    elif preset in PRESETS:
        if PRESETS[preset].model_type != key:
            raise ConfigError(
                "preset", f"{preset} is a {PRESETS[preset].model_type}: use hf:{PRESETS[preset].model_type}"
            )
        values, size = dict(PRESETS[preset].values), preset
    else:
        names = [n for n, p in PRESETS.items() if p.model_type == key] or list(PRESETS)
        raise ConfigError(
            "preset",
            f"unknown preset {preset!r}{_close(preset, PRESETS)}; "
            f"presets: {DEFAULT_SIZE}, {', '.join(names)}",
        )
    aliases = defaults.attribute_map  # e.g. GPT-2's num_hidden_layers -> n_layer: one name per value
    for name, text in overrides.items():
        for same in [k for k in values if aliases.get(k, k) == aliases.get(name, name)]:
            del values[same]
        values[name] = typed_value(key, defaults, name, text)
    return config_class(**values), size  # the values it refuses: loader.build names them


def _ids_in_vocabulary(defaults: Any, vocab_size: int | None) -> dict[str, int]:
    """Special token ids of the full vocabulary moved to the tiny one's last id (GPT-2's 50256)."""
    names = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")
    ids = {name: getattr(defaults, name, None) for name in names}
    return {
        n: vocab_size - 1 for n, i in ids.items() if vocab_size and isinstance(i, int) and i >= vocab_size
    }


def typed_value(model_type: str, defaults: Any, key: str, text: str) -> Any:
    """``text`` as the type ``key`` has in the config class's defaults (None or a dict: JSON),
    within what a model can be built with (loader.checked_number)."""
    if not hasattr(defaults, key):
        names = {*defaults.to_dict(), *defaults.attribute_map}
        raise ConfigError(
            loader.override_flag(key, text), f"{model_type}'s config has no {key!r}{_close(key, names)}"
        )
    current = getattr(defaults, key)
    try:
        if isinstance(current, bool):
            return _boolean(text)
        if isinstance(current, int):
            return loader.checked_number(key, text, int(text))
        if isinstance(current, float):
            return loader.checked_number(key, text, float(text))
        if isinstance(current, str):
            return text
        return loader.checked_number(key, text, json.loads(text))
    except (ValueError, json.JSONDecodeError):
        kind = "a JSON value" if not isinstance(current, bool | int | float) else type(current).__name__
        raise ConfigError(
            loader.override_flag(key, text), f"must be {kind} (as {model_type}'s config has it)"
        ) from None


def _boolean(text: str) -> bool:
    value = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}.get(
        text.strip().lower()
    )
    if value is None:
        raise ValueError(text)
    return value


def _close(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
