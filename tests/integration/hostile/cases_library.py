"""Library models (hf:, timm:, torchvision:) and `flowrate generate`'s edges.

A damaged save_pretrained folder (weights truncated, random, with an absurd header, a garbage
pickle, shapes of another config, a config.json value of the wrong type), a config value the
library refuses only while building, a keyword a timm model does not take, an empty prefix, and
generate's numbers: each is exit 2 and one line naming the file or the flag as typed
(problems/sources/loader.py is the boundary they pass through).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

from hostile.case import FAILED, HUGE, OK, USAGE, Case, Setup, Workspace

HANG_S = 10.0  # a refused value answers at once; a generation that ignores it is stopped here
# A tiny llama: 2 layers, hidden 32, 128 positions (its context), a vocabulary of 128.
TINY_LLAMA = {
    "num_hidden_layers": 2,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 128,
    "max_position_embeddings": 128,
}
RUN_TINY = ("--steps", "1", "--preheat", "1", "-b", "1", "--seq-len", "8")
RUN_IMAGES = ("--steps", "1", "--preheat", "1", "-b", "1", "--image-size", "32")
GENERATE_TINY = ("--prompt-len", "4", "--new-tokens", "2", "--repeats", "1", "--warmup", "0")


@cache
def _saved_llama() -> Path:
    """A tiny llama written by save_pretrained (once per session): config.json, model.safetensors."""
    from flowrate.problems.registry import get_problem

    folder = Path(tempfile.mkdtemp(prefix="flowrate-hostile-llama-")) / "llama"
    get_problem("hf:llama", options=TINY_LLAMA).build_model().save_pretrained(folder)
    return folder


def saved_model(damage: Callable[[Path], None] | None = None) -> Setup:
    """{model}: a copy of the tiny save_pretrained folder, then ``damage`` done to it."""

    def setup(ws: Workspace) -> None:
        folder = ws.path("model", "model")
        shutil.copytree(_saved_llama(), folder)
        if damage is not None:
            damage(folder)

    return setup


def _truncated(folder: Path) -> None:
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])


def _random(folder: Path) -> None:
    (folder / "model.safetensors").write_bytes(os.urandom(4096))


def _huge_header(folder: Path) -> None:
    """The 8-byte header length says 2**62 bytes: a reader that trusts it allocates exabytes."""
    weights = folder / "model.safetensors"
    weights.write_bytes(struct.pack("<Q", 2**62) + weights.read_bytes()[8:])


def _garbage_bin(folder: Path) -> None:
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(os.urandom(4096))


def _config(**values: object) -> Callable[[Path], None]:
    """config.json with ``values`` changed (the weights stay those of the original)."""

    def damage(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        config.update(values)
        (folder / "config.json").write_text(json.dumps(config))

    return damage


def _weights_case(label: str, damage: Callable[[Path], None], says: tuple[str, ...]) -> list[Case]:
    """The damaged folder refused by `run` and by `generate`, naming the file."""
    return [
        Case(
            f"library-{command}-{label}",
            (command, "-p", "hf:{model}", *(RUN_TINY if command == "run" else GENERATE_TINY)),
            USAGE,
            says,
            setup=saved_model(damage),
            not_says=("Traceback",),
        )
        for command in ("run", "generate")
    ]


def _config_case(value: str, problem: str = "hf:llama", driver: str = "in") -> Case:
    """A --hf-config value the library accepts, then fails on while building: named as typed."""
    key = value.partition("=")[0]
    return Case(
        f"library-{problem.partition(':')[0]}-config-{value.replace('=', '-')}",
        (
            "run",
            "-p",
            problem,
            "--hf-config",
            value,
            *(RUN_TINY if problem.startswith("hf:") else RUN_IMAGES),
        ),
        USAGE,
        (f"--hf-config {value}",),
        not_says=("--overrides", "--hf_config", f"--{key}:"),
        driver=driver,
    )


def _folder(**files: str) -> Setup:
    """{model}: a folder holding ``files`` (name: text), as a user's half-made model folder."""

    def setup(ws: Workspace) -> None:
        folder = ws.path("model", "model")
        folder.mkdir()
        for name, text in files.items():
            (folder / name).write_text(text)

    return setup


def _classes_case(problem: str, value: str, least: str = "1 class") -> Case:
    """A head of no classes builds; its labels cannot be drawn: refused, naming the override."""
    return Case(
        f"library-{problem.replace(':', '-')}-{value.replace('=', '-')}",
        ("run", "-p", problem, "--hf-config", value, *RUN_IMAGES),
        USAGE,
        (f"--hf-config {value}", f"needs {least} or more"),
        not_says=("random_",),
    )


def _generate_case(label: str, args: tuple[str, ...], says: tuple[str, ...], **more: object) -> Case:
    return Case(
        f"library-generate-{label}",
        ("generate", *args),
        USAGE,
        says,
        timeout_s=more.pop("timeout_s", HANG_S),  # type: ignore[arg-type]
        **more,  # type: ignore[arg-type]
    )


CASES = [
    # a damaged save_pretrained folder: the file is named, in run and in generate
    *_weights_case("safetensors-truncated", _truncated, ("model/model.safetensors", "not a readable")),
    *_weights_case("safetensors-random", _random, ("model/model.safetensors", "not a readable")),
    *_weights_case("safetensors-huge-header", _huge_header, ("model/model.safetensors", "header too large")),
    *_weights_case("bin-garbage", _garbage_bin, ("model/pytorch_model.bin", "not a readable")),
    *_weights_case(
        "shape-mismatch", _config(intermediate_size=48), ("model/model.safetensors", "another configuration")
    ),
    *_weights_case("config-json-word", _config(num_hidden_layers="abc"), ("model/config.json", "'abc'")),
    Case(
        "library-run-saved-folder-runs",
        ("run", "-p", "hf:{model}", *RUN_TINY, "--no-store"),
        OK,
        setup=saved_model(),
    ),
    # config values the library refuses late: the override is named as typed
    _config_case("num_attention_heads=0"),
    _config_case("hidden_size=30"),
    # transformers logs a warning first, through a handler that in this process may hold a
    # stream an earlier case's capture closed: a process of its own, as a user has
    _config_case("vocab_size=0", driver="proc"),
    _config_case("num_hidden_layers=-2"),
    _config_case("num_key_value_heads=3"),
    _config_case(f"hidden_size={HUGE}"),
    _config_case("rms_norm_eps=nan"),
    # the flag named as the user typed it, never a field behind it
    _config_case("nosuchkw=1", "timm:test_resnet"),
    _config_case("depth=abc", "timm:test_vit"),
    _config_case("nosuchkw=1", "torchvision:resnet18"),
    Case(
        "library-hf-empty",
        ("run", "-p", "hf:", *RUN_TINY),
        USAGE,
        ("hf: names no model",),
        not_says=("hf:.",),
    ),
    Case("library-timm-empty", ("run", "-p", "timm:", *RUN_TINY), USAGE, ("timm: names no model",)),
    # a classifier of no classes, in every library and task
    _classes_case("torchvision:resnet18", "num_classes=0"),
    _classes_case("torchvision:fcn_resnet50", "num_classes=0"),
    _classes_case("timm:test_resnet", "num_classes=-1"),
    _classes_case("hf:vit", "num_labels=0"),
    # a library model's own late failure in a step (BatchNorm given one value per channel by
    # batch 1): the run failed, said in one line naming the library's file
    Case(
        "library-timm-batch-one-batchnorm",
        ("run", "-p", "timm:test_resnet", *RUN_IMAGES, "--no-store"),
        FAILED,
        ("the timm model failed during the run", "timm/models/resnet.py", "1 value per channel"),
    ),
    # names and folders a user gets wrong
    Case(
        "library-torchvision-unknown", ("run", "-p", "torchvision:nosuch", *RUN_IMAGES), USAGE, ("'nosuch'",)
    ),
    Case("library-timm-unknown", ("run", "-p", "timm:nosuch", *RUN_IMAGES), USAGE, ("unknown timm model",)),
    Case("library-torchvision-empty", ("run", "-p", "torchvision:", *RUN_IMAGES), USAGE, ("names no model",)),
    Case(
        "library-hf-folder-missing",
        ("run", "-p", "hf:{tmp}/nosuch", *RUN_TINY),
        USAGE,
        ("no such folder",),
    ),
    Case(
        "library-hf-folder-no-config",
        ("run", "-p", "hf:{model}", *RUN_TINY),
        USAGE,
        ("has no config.json",),
        setup=_folder(**{"weights.txt": "x"}),
    ),
    Case(
        "library-hf-config-not-json",
        ("run", "-p", "hf:{model}", *RUN_TINY),
        USAGE,
        ("model/config.json",),
        setup=_folder(**{"config.json": "{not json"}),
    ),
    Case(
        "library-hf-config-json-array",
        ("run", "-p", "hf:{model}", *RUN_TINY),
        USAGE,
        ("model/config.json", "model_type"),
        setup=_folder(**{"config.json": "[1, 2]"}),
    ),
    Case(
        "library-hf-config-no-equals",
        ("run", "-p", "hf:llama", "--hf-config", "hidden_size", *RUN_TINY),
        USAGE,
        ("--hf-config", "KEY=VALUE"),
    ),
    _config_case("hidden_size=1e999"),
    _config_case("num_hidden_layers=nan"),
    Case(
        "library-hf-image-size-on-text",
        ("run", "-p", "hf:llama", "--steps", "1", "--preheat", "1", "-b", "1", "--image-size", "32"),
        USAGE,
        ("--image-size", "--seq-len"),
    ),
    Case(
        "library-timm-seq-len-on-images",
        ("run", "-p", "timm:test_resnet", "--steps", "1", "--preheat", "1", "-b", "2", "--seq-len", "8"),
        USAGE,
        ("--seq-len", "--image-size"),
    ),
    # generate's numbers and flags
    _generate_case("batch-size-huge", ("-p", "hf:llama", "--batch-size", HUGE), ("--batch-size",)),
    _generate_case(
        "batch-size-beyond-memory",
        ("-p", "hf:llama", "--batch-size", "2147483647", *GENERATE_TINY[:4]),
        ("--batch-size", "this device has"),
    ),
    _generate_case(
        "duration-inf", ("-p", "transformer", "--size", "debug", "--duration", "inf"), ("--duration",)
    ),
    _generate_case(
        "duration-nan", ("-p", "transformer", "--size", "debug", "--duration", "nan"), ("--duration",)
    ),
    _generate_case(
        "repeats-huge", ("-p", "transformer", "--size", "debug", "--repeats", HUGE), ("--repeats",)
    ),
    _generate_case(
        "prompt-len-beyond-context",
        ("-p", "hf:llama", "--prompt-len", "600"),
        ("--prompt-len", "give at most 511"),
        not_says=("--new-tokens",),
    ),
    _generate_case(
        "option-unknown",
        ("-p", "transformer", "--size", "debug", "-O", "nosuch=3"),
        ("-O nosuch",),
        not_says=("--nosuch",),
    ),
    _generate_case(
        "hf-empty",
        (
            "-p",
            "hf:",
        ),
        ("hf: names no model",),
        not_says=("hf:.",),
    ),
    _generate_case(
        "hf-config-heads-zero",
        ("-p", "hf:llama", "--hf-config", "num_attention_heads=0"),
        ("--hf-config num_attention_heads=0",),
    ),
    _generate_case(
        "prompt-len-zero",
        ("-p", "transformer", "--size", "debug", "--prompt-len", "0"),
        ("--prompt-len", "got 0"),
    ),
    _generate_case(
        "new-tokens-huge", ("-p", "transformer", "--size", "debug", "--new-tokens", HUGE), ("--new-tokens",)
    ),
    _generate_case(
        "warmup-negative", ("-p", "transformer", "--size", "debug", "--warmup", "-1"), ("--warmup", "got -1")
    ),
    _generate_case("not-a-decoder", ("-p", "fc_mnist", "--size", "debug"), ("--problem", "not a decoder")),
    _generate_case(
        "mode-train",
        ("-p", "transformer", "--size", "debug", "--mode", "train"),
        ("--mode", "inference only"),
    ),
    _generate_case(
        "precision-int8",
        ("-p", "transformer", "--size", "debug", "--precision", "int8-weights"),
        ("--precision",),
    ),
    _generate_case(
        "hf-config-vocab-zero",
        ("-p", "hf:llama", "--hf-config", "vocab_size=0", *GENERATE_TINY[:4]),
        ("--hf-config vocab_size=0",),
        driver="proc",  # transformers' logging handler: see vocab_size=0's run case above
        timeout_s=120,
        not_says=("Logging error",),
    ),
    # a generation of an hf: model says nothing the user cannot act on (a process of its own:
    # the library's import-time log lines come once per process)
    Case(
        "library-generate-hf-quiet",
        ("generate", "-p", "hf:llama", *GENERATE_TINY, "--no-store"),
        OK,
        driver="proc",
        timeout_s=120,
        not_says=("FutureWarning", "past_key_values", "torchao", "_pytree", "Failed to load"),
    ),
]
