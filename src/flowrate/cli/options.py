"""The click options commands share: what defines a run, where its result goes, which recorded
runs to take, and the target device. Each is a decorator; a command stacks the ones it takes.

A run's options are made from RunConfig's fields (``setting_option``; a generation's from
GenerateConfig's the same way): each field's Setting gives its flags, help and value type, and its
default is the only default, shown in the help.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from flowrate.cli.param_types import SHAPE, BatchSize, CountOrAuto, FiniteRange, SettingType
from flowrate.config import RunConfig, SettingField, setting_of, settings
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


def setting_option(
    found: SettingField, config: type = RunConfig
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The click option of one field of ``config``, made from its Setting: its flags, help and
    default text, metavar, and a value type that holds it to the Setting's bounds or choices. A
    flag left out gives None, so the config's own default applies."""
    kind = found.kind
    options: dict[str, Any] = {"help": found.help, "metavar": found.setting.metavar}
    if kind == "bool":
        options.update(is_flag=True, default=None)
    elif kind in ("int", "float"):
        options["type"] = SettingType(found.name, config)
    elif kind == "batch":
        options["type"] = BatchSize(config)
    elif kind == "count_or_auto":
        options["type"] = CountOrAuto(found.name, config)
    elif kind == "choice":
        options["type"] = click.Choice(found.choice_names, case_sensitive=False)
    elif kind == "folder":
        options["type"] = click.Path(file_okay=False)
    return click.option(*found.flags, found.name, **options)


# the problem's shape flags: problem options (RunConfig.problem_options), listed after the batch
_SHAPE_OPTIONS = [
    click.option("--seq-len", type=SHAPE, help="Sequence length of token problems."),
    click.option("--image-size", type=SHAPE, help="Image side of image problems."),
    click.option(
        "--sample-shape", type=SHAPE, help="Sequence length or image side, whichever the problem has."
    ),
    click.option("--layers", type=SHAPE, help="Transformer layers."),
    click.option("--heads", type=SHAPE, help="Attention heads."),
    click.option("--hidden", type=SHAPE, help="Hidden size."),
    click.option("--vocab-size", type=SHAPE, help="Vocabulary size."),
]
# after the settings: the other ways to set problem options, and an hf: model's preset (its size)
_PROBLEM_OPTIONS = [
    click.option(
        "-O",
        "--option",
        "extra_options",
        multiple=True,
        metavar="KEY=VALUE",
        help=setting_of(RunConfig, "problem_options").help,
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


def _run_options() -> list[Callable[..., Any]]:
    """RunConfig's settings as options, in field order, the shape flags after the batch's."""
    options = []
    for found in settings(RunConfig):
        if found.setting.own_option:
            options.append(setting_option(found))
        if found.name == "global_batch_size":
            options += _SHAPE_OPTIONS
    return options + _PROBLEM_OPTIONS


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
    """The options that define a run: every command that runs, checks or plans one takes them,
    made from RunConfig's Settings as they are when the command is declared."""
    return _stacked(_run_options(), function)


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
