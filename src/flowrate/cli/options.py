"""The click options commands share: what defines a run, where its result goes, which recorded
runs to take, and the target device. Each is a decorator; a command stacks the ones it takes.

Defaults shown in help come from RunConfig, whose defaults are the only defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any

import click

from flowrate.cli.param_types import SHAPE, BatchSize, FiniteRange, ResidentBlocks, Setting
from flowrate.config import (
    Execution,
    FreedMemory,
    Mode,
    OptimizerName,
    Precision,
    RunConfig,
)
from flowrate.results.store import DEFAULT_PATH, ENV_VAR

MAX_SHARDS = 100_000


def checked_tags(ctx: click.Context, param: click.Parameter, tags: tuple[str, ...]) -> tuple[str, ...]:
    """-t/--tag's callback: a tag that is empty, multi-line or too long is refused as the command
    line is read, not after a run has measured."""
    from flowrate.results.validate import check_tags

    check_tags(tags)
    return tags


STORE_HELP = f"The results store (SQLite). [default: ${ENV_VAR}, else ./{DEFAULT_PATH}]"

store_option = click.option("--store", type=click.Path(dir_okay=False), help=STORE_HELP)

_DEFAULTS = {f.name: f.default for f in fields(RunConfig) if f.default is not MISSING}


def _default(name: str) -> str:
    return f" [default: {_DEFAULTS[name]}]"


_RUN_OPTIONS = [
    click.option(
        "-p",
        "--problem",
        help="Zoo problem (see `flowrate list`) or PATH.py:FACTORY." + _default("problem"),
    ),
    click.option(
        "--size",
        help="Named size of the problem family, e.g. debug or gpt2-medium. [default: the family's]",
    ),
    click.option(
        "--mode",
        type=click.Choice([m.value for m in Mode] + ["training", "inference"], case_sensitive=False),
        help="train: forward, backward, optimizer step; infer: forward only. "
        "[default: train; infer for kernels]",
    ),
    click.option(
        "-b",
        "--batch-size",
        type=BatchSize(),
        metavar="N|auto",
        help="Samples per step, or 'auto' to halve from --max-batch-size "
        "until a step fits in memory. [default: the problem's]",
    ),
    click.option(
        "--max-batch-size",
        type=Setting("max_batch_size"),
        help="Where --batch-size auto starts." + _default("max_batch_size"),
    ),
    click.option(
        "--global-batch-size",
        type=Setting("global_batch_size"),
        help="Data-parallel runs (torchrun): samples per step over all ranks, split evenly; "
        "instead of --batch-size, which is per rank.",
    ),
    click.option("--seq-len", type=SHAPE, help="Sequence length of token problems."),
    click.option("--image-size", type=SHAPE, help="Image side of image problems."),
    click.option(
        "--sample-shape", type=SHAPE, help="Sequence length or image side, whichever the problem has."
    ),
    click.option("--layers", type=SHAPE, help="Transformer layers."),
    click.option("--heads", type=SHAPE, help="Attention heads."),
    click.option("--hidden", type=SHAPE, help="Hidden size."),
    click.option("--vocab-size", type=SHAPE, help="Vocabulary size."),
    click.option(
        "--precision",
        type=click.Choice([p.value for p in Precision], case_sensitive=False),
        help="fp32, tf32 (CUDA), bf16 / fp16 autocast (fp16 with loss scaling), pure-bf16."
        + _default("precision"),
    ),
    click.option(
        "--optimizer",
        type=click.Choice([o.value for o in OptimizerName], case_sensitive=False),
        help="Optimizer of training steps." + _default("optimizer"),
    ),
    click.option(
        "--lr",
        "learning_rate",
        type=Setting("learning_rate"),
        help="Learning rate." + _default("learning_rate"),
    ),
    click.option(
        "--execution",
        type=click.Choice([e.value for e in Execution], case_sensitive=False),
        help="Where the weights live: resident on the device, or streaming (weights and optimizer "
        "in host memory, streamed to the device one block at a time)." + _default("execution"),
    ),
    click.option(
        "--recompute",
        is_flag=True,
        default=None,
        help="Streaming: recompute each block's activations in backward instead of keeping them.",
    ),
    click.option(
        "--resident-blocks",
        type=ResidentBlocks(),
        metavar="N|auto",
        help="Streaming: keep the N outermost blocks (first, last, second, …) on the device with a "
        "device optimizer. [default: auto: the end blocks that fit in 1/8 of a CUDA device's memory]",
    ),
    click.option(
        "--clip-grad-norm",
        type=Setting("clip_grad_norm"),
        help="Clip the global gradient norm to this value before each optimizer step.",
    ),
    click.option(
        "--compile",
        is_flag=True,
        default=None,
        help="Compile the step with torch.compile, reusing what `flowrate compile` cached for this "
        "configuration (the compile time and cache hit are recorded).",
    ),
    click.option(
        "--device-memory-limit",
        "device_memory_limit_gib",
        type=Setting("device_memory_limit_gib"),
        metavar="GIB",
        help="CUDA: cap this process's device memory (a per-process fraction), e.g. to prove a "
        "streamed model fits in 16 GiB.",
    ),
    click.option(
        "--device", help="auto (cuda when present, else cpu), cpu, cuda or cuda:N." + _default("device")
    ),
    click.option(
        "--seed", type=Setting("seed"), help="Seed of weights and synthetic data." + _default("seed")
    ),
    click.option(
        "--threads",
        type=Setting("threads"),
        help="CPU threads for PyTorch (torch.set_num_threads). [default: PyTorch's]",
    ),
    click.option(
        "--freed-memory",
        type=click.Choice([h.value for h in FreedMemory], case_sensitive=False),
        help="keep: host memory a step frees stays in the process for the next step; release: the "
        "C library's default, which returns large freed blocks to the OS, so each step's large "
        "tensors pay page faults again (glibc)." + _default("freed_memory"),
    ),
    click.option(
        "--preheat",
        "preheat_steps",
        type=Setting("preheat_steps"),
        help="Untimed warm-up steps." + _default("preheat_steps"),
    ),
    click.option(
        "--steps",
        type=Setting("steps"),
        help="Time exactly this many steps (overrides --duration and --min-steps).",
    ),
    click.option(
        "--min-steps",
        type=Setting("min_steps"),
        help="Time at least this many steps." + _default("min_steps"),
    ),
    click.option(
        "--duration",
        "duration_s",
        type=Setting("duration_s"),
        help="Time at least this many seconds." + _default("duration_s"),
    ),
    click.option(
        "--sample-every",
        type=Setting("sample_every"),
        help="Steps between sample points. [default: enough for --target-interval]",
    ),
    click.option(
        "--target-interval",
        "target_interval_s",
        type=Setting("target_interval_s"),
        help="Seconds an interval should last when --sample-every is automatic."
        + _default("target_interval_s"),
    ),
    click.option(
        "--smoothing", type=Setting("smoothing"), help="Rate's smoothing factor α." + _default("smoothing")
    ),
    click.option(
        "--checkpoint-every",
        type=Setting("checkpoint_every"),
        help="Save model and optimizer state every N timed steps (needs --checkpoint-dir); "
        "checkpoint time is reported apart.",
    ),
    click.option("--checkpoint-dir", type=click.Path(file_okay=False), help="Where checkpoints go."),
    click.option(
        "--keep-checkpoints",
        type=Setting("keep_checkpoints"),
        help="Keep only the newest N checkpoints, deleting older ones after each save. [default: all]",
    ),
    click.option(
        "--measure-peak",
        is_flag=True,
        help="First time a large GEMM at this precision: MFU is also given against that measured peak.",
    ),
    click.option(
        "--data",
        "data_dir",
        type=click.Path(file_okay=False),
        metavar="DIR",
        help="Read every step's batch from this dataset (`flowrate data make` / `data import-*`) "
        "instead of synthetic data; the result records the input-bound share.",
    ),
    click.option(
        "--loader-workers",
        type=Setting("loader_workers"),
        help="--data: loader worker processes (0 reads in the training thread)." + _default("loader_workers"),
    ),
    click.option(
        "--prefetch",
        type=Setting("prefetch"),
        help="--data: batches each loader worker keeps ready." + _default("prefetch"),
    ),
    click.option(
        "--shuffle-buffer",
        type=Setting("shuffle_buffer"),
        help="--data: records per shuffle window of the loader." + _default("shuffle_buffer"),
    ),
    click.option(
        "--dist-timeout",
        "dist_timeout_s",
        type=Setting("dist_timeout_s"),
        metavar="SECONDS",
        help="Data-parallel runs: how long a rank waits for the others before the run stops with "
        "an error." + _default("dist_timeout_s"),
    ),
    click.option(
        "-O",
        "--option",
        "extra_options",
        multiple=True,
        metavar="KEY=VALUE",
        help="Any shape option of the problem, e.g. -O m=4096 for gemm (see `flowrate list`).",
    ),
    click.option(
        "--hf-config",
        "hf_config",
        multiple=True,
        metavar="KEY=VALUE",
        help="hf: models: a config value, typed as the config class has it, e.g. --hf-config "
        "num_hidden_layers=4 (repeatable; task=causal-lm|masked-lm|seq2seq|sequence-classification "
        "picks the task).",
    ),
    click.option(
        "--preset",
        help="hf: models: a published architecture's config values, e.g. llama-3.2-1b "
        "(`flowrate list --source hf`). [default: a tiny debug size]",
    ),
]


_OUTPUT_OPTIONS = [
    click.option(
        "--store", type=click.Path(dir_okay=False), help="Record the run in this store. " + STORE_HELP
    ),
    click.option(
        "-t",
        "--tag",
        "tags",
        multiple=True,
        callback=checked_tags,
        help="Label the recorded run (repeatable), e.g. -t nightly.",
    ),
    click.option("--no-store", is_flag=True, help="Do not record the run in the results store."),
    click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON on stdout."),
    click.option(
        "-o", "--out", type=click.Path(dir_okay=False), help="Write the result as JSON to this file."
    ),
    click.option(
        "-q", "--quiet", is_flag=True, help="No summary or progress on stderr (warnings still show)."
    ),
]


def _stacked(options: list[Callable[..., Any]], function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` decorated with every option, listed in --help in the order given."""
    for option in reversed(options):
        function = option(function)
    return function


def run_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """The options that define a run: every command that runs, checks or plans one takes them."""
    return _stacked(_RUN_OPTIONS, function)


def output_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """--store, --tag, --no-store, --json, --out and --quiet: where a run's result goes."""
    return _stacked(_OUTPUT_OPTIONS, function)


_FILTERS = [
    click.option("--problem", "-p", help="Only runs of this problem (family, or family/size)."),
    click.option("--device", help="Only runs on a device whose name contains this (or a type: cpu, cuda)."),
    click.option("--precision", help="Only runs at this precision (fp32, bf16, …)."),
    click.option("--mode", type=click.Choice(["train", "infer"]), help="Only training or inference runs."),
    click.option("--execution", help="Only runs in this execution mode."),
    click.option("--tag", help="Only runs with this tag."),
    click.option("--sweep", help="Only runs of this sweep (id, id prefix or name)."),
    click.option("--since", help="Only runs from this date or time on (2026-11-21, or 7d / 12h ago)."),
    click.option("--until", help="Only runs up to this date (inclusive) or time."),
]
FILTER_NAMES = ("problem", "device", "precision", "mode", "execution", "tag", "sweep", "since", "until")


def filter_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """--problem, --device, …, --until: which recorded runs to take."""
    return _stacked(_FILTERS, function)


def selection_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """REFS… plus the filters and --store: everything select_runs() needs."""
    function = filter_options(function)
    function = store_option(function)
    return click.argument("refs", nargs=-1, metavar="[RUN|TAG|FILE]...")(function)


target_option = click.option(
    "--target",
    help="A device from the peak table to check against instead of this machine's, e.g. h100, "
    "a100-80gb, h200 (an unknown name lists them), or a calibrated device.",
)
host_memory_option = click.option(
    "--host-memory",
    type=FiniteRange(min=0, min_open=True),
    metavar="GIB",
    help="Host RAM that streaming's host-side state must fit in. [default: this machine's available RAM]",
)


_DATASET_OPTIONS = [
    click.option(
        "-p",
        "--problem",
        required=True,
        help="The problem the data is for (its samples' shapes): a zoo name or PATH.py:FACTORY.",
    ),
    click.option("--size", help="Named size of the problem family. [default: the family's]"),
    click.option("--seq-len", type=SHAPE, help="Sequence length of token problems."),
    click.option("--image-size", type=SHAPE, help="Image side of image problems."),
    click.option("--vocab-size", type=SHAPE, help="Vocabulary size of token problems."),
    click.option(
        "-O",
        "--option",
        "extra_options",
        multiple=True,
        metavar="KEY=VALUE",
        help="Any shape option of the problem.",
    ),
    click.option(
        "--shards",
        type=click.IntRange(1, MAX_SHARDS),
        default=8,
        show_default=True,
        help="Shard files to write.",
    ),
    click.option(
        "-o",
        "--out",
        required=True,
        type=click.Path(file_okay=False),
        help="The dataset folder (new or empty).",
    ),
]


def dataset_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """The problem a dataset is for, its shape options, the shards and the folder: `flowrate data`'s
    make and import commands."""
    return _stacked(_DATASET_OPTIONS, function)
