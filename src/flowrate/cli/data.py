"""`flowrate data`: make, import and inspect sharded datasets for `flowrate run --data`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from flowrate.cli.options import dataset_options
from flowrate.cli.param_types import SettingType

MAX_SAMPLES = 10**12  # beyond what any dataset holds; the free space is checked before writing

if TYPE_CHECKING:
    from flowrate.data.records import DatasetIndex
    from flowrate.problems.base import Problem


@click.group("data")
def command() -> None:
    """Sharded datasets for `flowrate run --data` and `flowrate analyze-input`.

    A dataset is a folder of numpy-memmap shards of fixed-size records with a crc32 each, and an
    index.json. Make one from a problem's synthetic data, or import a flat token file or an image
    folder; `flowrate data info` describes one and checks it.
    """


@command.command("make")
@dataset_options
@click.option("--samples", type=click.IntRange(1, MAX_SAMPLES), required=True, help="Samples to write.")
@click.option(
    "--seed", type=SettingType("seed"), default=0, show_default=True, help="Seed of the synthetic data."
)
def make_command(samples: int, seed: int, shards: int, out: str, **flags: Any) -> None:
    """Write a problem's synthetic data as a dataset, to measure the whole input pipeline."""
    from flowrate.data.make import make_dataset

    problem = _problem(flags)
    _check_free_space(problem, samples, out)
    _write(problem, out, lambda: make_dataset(problem, out, samples, shards, seed=seed), "synthetic data")


@command.command("import-tokens")
@click.argument("tokens", type=click.Path(dir_okay=False))
@dataset_options
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


@command.command("import-images")
@click.argument("folder", type=click.Path(file_okay=False))
@dataset_options
@click.option(
    "--seed",
    type=SettingType("seed"),
    default=0,
    show_default=True,
    help="Seed of the order the images are written in.",
)
def import_images_command(folder: str, seed: int, shards: int, out: str, **flags: Any) -> None:
    """Import an image folder (one subfolder per class), decoded and resized to the problem's images."""
    from flowrate.data.importers import import_images

    problem = _problem(flags)
    _write(problem, out, lambda: import_images(folder, out, problem, shards=shards, seed=seed), folder)


@command.command("info")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--verify", is_flag=True, help="Read every record and check its crc32.")
@click.option("--json", "as_json", is_flag=True, help="Print the index as JSON on stdout.")
def info_command(directory: str, verify: bool, as_json: bool) -> None:
    """Describe a dataset: samples, shards, fields, origin; with --verify, check every record."""
    import json

    from flowrate.cli import console
    from flowrate.cli.data_text import info_rows
    from flowrate.data.records import check_shard_files, read_index
    from flowrate.data.records import verify as verify_records
    from flowrate.units import counted

    index = read_index(directory)
    check_shard_files(directory, index)
    if as_json:
        console.data(json.dumps(index.to_dict(), indent=2))
    else:
        console.key_value_table(f"dataset {directory}", info_rows(directory, index), to_stdout=True)
    if verify:
        start = time.perf_counter()
        checked = verify_records(directory)
        console.status(
            f"all {counted(checked, 'record')} pass their crc32 check ({time.perf_counter() - start:.1f} s)"
        )


def _problem(flags: dict[str, Any]) -> Problem:
    from flowrate.cli.resolve import parse_problem_options
    from flowrate.problems.registry import get_problem

    options = parse_problem_options(flags.pop("extra_options", ()))
    options.update({k: v for k in ("seq_len", "image_size", "vocab_size") if (v := flags.pop(k)) is not None})
    return get_problem(flags["problem"], flags["size"], options)


def _check_free_space(problem: Problem, samples: int, out: str) -> None:
    """Refuse a dataset the disk cannot hold before writing any of it (not a full disk midway)."""
    import shutil
    from pathlib import Path

    from flowrate.data.make import problem_label, problem_spec
    from flowrate.errors import ConfigError
    from flowrate.units import si

    per_sample = sum(f.record_bytes for f in problem_spec(problem, "problem")) + 4  # + its crc32
    folder = Path(out).absolute()
    while not folder.exists() and folder != folder.parent:  # the folder it would be made in
        folder = folder.parent
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return  # not a folder to write in: the writer says so, naming --out
    if samples * per_sample > free:
        raise ConfigError(
            "samples",
            f"{samples} samples of {problem_label(problem)} take {si(samples * per_sample, 'B')}, "
            f"but {folder} has {si(free, 'B')} free; make fewer",
        )


def _write(problem: Problem, out: str, write: Callable[[], DatasetIndex], source: str) -> None:
    from flowrate.cli import console
    from flowrate.cli.paths import check_folder
    from flowrate.data.make import problem_label
    from flowrate.units import counted

    check_folder(out, "out")
    start = time.perf_counter()
    index = write()
    fields = ", ".join(f.describe() for f in index.fields)
    console.status(
        f"wrote {counted(index.samples, 'sample')} of {problem_label(problem)} ({fields}) from {source} "
        f"into {counted(len(index.shards), 'shard')} in {out} ({time.perf_counter() - start:.1f} s)"
    )
