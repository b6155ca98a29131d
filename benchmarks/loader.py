"""How fast does flowrate's loader read? Against a plain torch DataLoader over the same files.

Two datasets are written with `flowrate data make` into a temporary folder: resnet50-shaped images
(3 x 224 x 224, stored as 8-bit pixels, 150 kB a sample, with an int64 label) and GPT-2-shaped
token windows (1025 uint16 tokens, 2 kB a sample). Each is read with 0, 1 and 2 workers by

- flowrate's loader (shards to workers, batch gathers straight into shared memory, crc32 checked),
- the same with the crc32 checks off,
- a plain torch DataLoader: a map-style Dataset over the same memmap shards returning one sample
  at a time, shuffle=True, default collation, the same batch size, workers and prefetch depth,

in rounds whose order turns round each time (torch, flowrate, no crc; no crc, flowrate, torch;
…: benchmarks/side_by_side.py's in_rounds). A measurement times a fixed number of batches
(24 of images, 400 of tokens) after the first few (worker start-up and the prefetch queue are left
out); the page cache is warm (the files were just written). The script prints each side's median
samples/s and the ratio of the means flowrate / torch with its 95% interval (before side_by_side:
the ratio of the medians).

    python benchmarks/loader.py                     # 3 rounds
    python benchmarks/loader.py --rounds 1 --scale 0.5
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

import flowrate
from flowrate.data.loader import Loader, LoaderSettings
from flowrate.data.make import make_dataset
from flowrate.data.records import DatasetIndex, Shard, read_index
from flowrate.problems.registry import get_problem
from record import Figure, record  # beside this script
from side_by_side import SideBySide, in_rounds

CASES = {
    # name: (problem, size, samples, shards, batch size, timed batches)
    "resnet50 images 3x224x224 uint8": ("resnet50", "default", 2560, 8, 64, 24),
    "token windows 1024 (+1) uint16": ("transformer", "gpt2", 32768, 8, 64, 400),
}
WORKERS = (0, 1, 2)
PREFETCH = 2


class PlainDataset(Dataset[dict[str, torch.Tensor]]):
    """What a user writes by hand: one sample per __getitem__, found by shard and offset."""

    def __init__(self, directory: Path, index: DatasetIndex) -> None:
        self.directory = directory
        self.index = index
        self.offsets = index.offsets()
        self.shards: dict[int, Shard] = {}

    def __len__(self) -> int:
        return self.index.samples

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        shard = int(np.searchsorted(self.offsets, i, side="right") - 1)
        if shard not in self.shards:  # opened lazily, so each worker maps the files itself
            self.shards[shard] = Shard.open(self.directory, self.index.shards[shard], self.index.fields)
        local = i - int(self.offsets[shard])
        columns = self.shards[shard].columns
        return {name: torch.from_numpy(np.array(column[local])) for name, column in columns.items()}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "shards": {}}


def timed(batches: Iterable[dict[str, torch.Tensor]], warmup: int, count: int) -> float:
    """Samples/s over ``count`` batches after ``warmup`` batches."""
    iterator = iter(batches)
    for _ in range(warmup):
        next(iterator)
    start = time.perf_counter()
    samples = 0
    for _ in range(count):
        batch = next(iterator)
        samples += len(next(iter(batch.values())))
    return samples / (time.perf_counter() - start)


def flowrate_side(directory: Path, batch: int, workers: int, verify: bool, warmup: int, count: int) -> float:
    settings = LoaderSettings(batch_size=batch, workers=workers, prefetch=PREFETCH, seed=0, verify=verify)
    loader = Loader(directory, settings, rank=0, world_size=1)
    try:
        return timed(loader, warmup, count)
    finally:
        loader.close()


def torch_side(directory: Path, batch: int, workers: int, warmup: int, count: int) -> float:
    dataset = PlainDataset(directory, read_index(directory))
    loader = DataLoader(
        dataset,
        batch_size=batch,
        shuffle=True,
        num_workers=workers,
        prefetch_factor=PREFETCH if workers else None,
        generator=torch.Generator().manual_seed(0),
    )
    return timed(loader, warmup, count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply each case's timed batches")
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, flowrate {flowrate.__version__}, {os.cpu_count()} cores, "
        f"{args.rounds} rounds, prefetch {PREFETCH}"
    )
    header = f"{'case':32s} {'workers':>7s} | {'torch DataLoader':>16s} | {'flowrate':>10s} | "
    header += f"{'no crc':>10s} | ratio [95% interval]"
    with tempfile.TemporaryDirectory(prefix="flowrate-loader-") as tmp:
        rows = []
        figures: list[Figure] = []
        for name in args.cases.split(","):
            problem_name, size, samples, shards, batch, timed_batches = CASES[name]
            count = max(1, round(timed_batches * args.scale))
            directory = Path(tmp) / problem_name
            start = time.perf_counter()
            make_dataset(get_problem(problem_name, size), directory, samples, shards)
            print(
                f"{name}: wrote {samples} samples in {shards} shards in {time.perf_counter() - start:.1f} s"
            )
            warmup = 2 * PREFETCH * max(WORKERS) + 1
            if warmup + count > samples // batch:
                needed = warmup + count
                raise SystemExit(
                    f"{name}: {samples // batch} batches per epoch, fewer than the {needed} needed"
                )
            for workers in WORKERS:
                sides = {
                    "torch": partial(torch_side, directory, batch, workers, warmup, count),
                    "flowrate": partial(flowrate_side, directory, batch, workers, True, warmup, count),
                    "no crc": partial(flowrate_side, directory, batch, workers, False, warmup, count),
                }
                rates = in_rounds(sides, args.rounds)
                medians = {label: statistics.median(values) for label, values in rates.items()}
                compared = SideBySide(rates["torch"], rates["flowrate"])
                found = compared.interval
                shown = f" [{found[0]:.2f}, {found[1]:.2f}]" if found else ""
                rows.append(
                    f"{name:32s} {workers:7d} | {medians['torch']:16.0f} | {medians['flowrate']:10.0f} | "
                    f"{medians['no crc']:10.0f} | {compared.ratio:.2f}x{shown}"
                )
                print(rows[-1], flush=True)
                runs = f"median of {args.rounds} rounds"
                figures += [
                    Figure(f"{name} {workers} workers {side}", round(medians[side]), "samples/s", None, runs)
                    for side in ("torch", "flowrate", "no crc")
                ]
                figures.append(
                    Figure(
                        f"{name} {workers} workers flowrate / torch",
                        round(compared.ratio, 4),
                        "ratio",
                        note=f"ratio of the means, in rounds: {compared.describe()}",
                    )
                )
    print()
    print(header)
    print("\n".join(rows))
    record("loader", figures, note=f"prefetch {PREFETCH}, --scale {args.scale}")


if __name__ == "__main__":
    main()
