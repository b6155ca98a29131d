"""`flowrate data`: make, import and inspect sharded datasets for `flowrate run --data`."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from flowrate.data.records import DatasetIndex
    from flowrate.problems.base import Problem

_PROBLEM_OPTIONS = [
    click.option(
        "-p",
        "--problem",
        required=True,
        help="The problem the data is for (its samples' shapes): a zoo name or PATH.py:FACTORY.",
    ),
    click.option("--size", help="Named size of the problem family. [default: the family's]"),
    click.option("--seq-len", type=int, help="Sequence length of token problems."),
    click.option("--image-size", type=int, help="Image side of image problems."),
    click.option("--vocab-size", type=int, help="Vocabulary size of token problems."),
    click.option(
        "-O",
        "--option",
        "extra_options",
        multiple=True,
        metavar="KEY=VALUE",
        help="Any shape option of the problem.",
    ),
    click.option(
        "--shards", type=click.IntRange(min=1), default=8, show_default=True, help="Shard files to write."
    ),
    click.option(
        "-o",
        "--out",
        required=True,
        type=click.Path(file_okay=False),
        help="The dataset folder (new or empty).",
    ),
]


def _problem_options(function: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_PROBLEM_OPTIONS):
        function = option(function)
    return function


@click.group("data")
def group() -> None:
    """Sharded datasets for `flowrate run --data` and `flowrate analyze-input`.

    A dataset is a folder of numpy-memmap shards of fixed-size records with a crc32 each, and an
    index.json. Make one from a problem's synthetic data, or import a flat token file or an image
    folder; `flowrate data info` describes one and checks it.
    """


@group.command("make")
@_problem_options
@click.option("--samples", type=click.IntRange(min=1), required=True, help="Samples to write.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the synthetic data.")
def make_command(samples: int, seed: int, shards: int, out: str, **flags: Any) -> None:
    """Write a problem's synthetic data as a dataset, to measure the whole input pipeline."""
    from flowrate.data.make import make_dataset

    problem = _problem(flags)
    _write(problem, out, lambda: make_dataset(problem, out, samples, shards, seed=seed), "synthetic data")


@group.command("import-tokens")
@click.argument("tokens", type=click.Path(dir_okay=False))
@_problem_options
@click.option(
    "--dtype",
    type=click.Choice(["uint16", "uint32"]),
    default="uint16",
    show_default=True,
    help="The file's token dtype (nanoGPT writes uint16).",
)
def import_tokens_command(tokens: str, dtype: str, shards: int, out: str, **flags: Any) -> None:
    """Import a flat token file (a bare array of token ids, as nanoGPT's train.bin), cut into the
    problem's sample windows."""
    from flowrate.data.importers import import_tokens

    problem = _problem(flags)
    _write(problem, out, lambda: import_tokens(tokens, out, problem, dtype=dtype, shards=shards), tokens)


@group.command("import-images")
@click.argument("folder", type=click.Path(file_okay=False))
@_problem_options
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the order the images are written in."
)
def import_images_command(folder: str, seed: int, shards: int, out: str, **flags: Any) -> None:
    """Import an image folder (one subfolder per class), decoded and resized to the problem's images."""
    from flowrate.data.importers import import_images

    problem = _problem(flags)
    _write(problem, out, lambda: import_images(folder, out, problem, shards=shards, seed=seed), folder)


@group.command("info")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--verify", is_flag=True, help="Read every record and check its crc32.")
@click.option("--json", "as_json", is_flag=True, help="Print the index as JSON on stdout.")
def info_command(directory: str, verify: bool, as_json: bool) -> None:
    """Describe a dataset: samples, shards, fields, origin; with --verify, check every record."""
    import json

    from flowrate.cli import console
    from flowrate.data.records import check_shard_files, read_index
    from flowrate.data.records import verify as verify_records

    index = read_index(directory)
    check_shard_files(directory, index)
    if as_json:
        console.data(json.dumps(index.to_dict(), indent=2))
    else:
        console.key_value_table(f"dataset {directory}", info_rows(directory, index))
    if verify:
        start = time.perf_counter()
        checked = verify_records(directory)
        console.status(f"all {checked} records pass their crc32 check ({time.perf_counter() - start:.1f} s)")


def info_rows(directory: str | Path, index: DatasetIndex) -> list[tuple[str, str]]:
    """The human description of a dataset, as (label, value) rows."""
    from flowrate.units import si

    records = [s.records for s in index.shards]
    size = sum((Path(directory) / s.file).stat().st_size for s in index.shards)
    origin = dict(index.origin)
    source = origin.pop("source", "?")
    problem = origin.pop("problem", None)
    made_for = f"{problem['name']}/{problem['size']}" if isinstance(problem, dict) else "—"
    rows = [
        ("samples", f"{index.samples}"),
        ("shards", f"{len(records)} ({min(records)}–{max(records)} records each), {si(size, 'B')} on disk"),
        ("fields", ", ".join(f.describe() for f in index.fields)),
        ("made for", made_for),
        ("source", source),
    ]
    classes = origin.pop("classes", None)
    if classes:
        rows.append(
            ("classes", f"{len(classes)}: {', '.join(classes[:8])}" + (", …" if len(classes) > 8 else ""))
        )
    rows += [(key, str(value)) for key, value in origin.items()]
    return rows


def _problem(flags: dict[str, Any]) -> Problem:
    from flowrate.cli.run import _parse_extra_options
    from flowrate.problems.registry import get_problem

    options = _parse_extra_options(flags.pop("extra_options", ()))
    options.update({k: v for k in ("seq_len", "image_size", "vocab_size") if (v := flags.pop(k)) is not None})
    return get_problem(flags["problem"], flags["size"], options)


def _write(problem: Problem, out: str, write: Callable[[], DatasetIndex], source: str) -> None:
    from flowrate.cli import console
    from flowrate.data.make import problem_label

    start = time.perf_counter()
    index = write()
    fields = ", ".join(f.describe() for f in index.fields)
    console.status(
        f"wrote {index.samples} samples of {problem_label(problem)} ({fields}) from {source} into "
        f"{len(index.shards)} shards in {out} ({time.perf_counter() - start:.1f} s)"
    )
