"""Does the input analyzer measure a pipeline of known cost at its known rate? The wall-clock half
of tests/unit/test_loader.py's known-answer tests (which give the analyzer its rates, or run it on
a fake clock, so that a loaded machine cannot fail them).

A dataset of fc_mnist samples (784 bytes each, 7 shards) is read with 1/256 s of artificial work
per sample (``LoaderSettings.sample_cost_s``, a sleep in the reader), batch 4, by 0, 1 and 2
loader workers. One reader then delivers 256 samples/s; two workers read concurrently, 512. For
each configuration the script prints the median samples/s over the rounds, the expected rate and
their ratio (1.00 is exact; reading, checks and the main process's own work pull it a little
under), and the two-worker over one-worker ratio (2.00 when the workers really run at once).

    python benchmarks/input_analyzer.py                 # 3 rounds of 1 s per configuration
    python benchmarks/input_analyzer.py --rounds 5 --seconds 2
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import torch

from flowrate.data.loader import LoaderSettings
from flowrate.data.make import make_dataset
from flowrate.harness.analyze_input import analyze_input
from flowrate.problems.registry import get_problem
from record import Figure, record  # beside this script

SAMPLE_COST_S = 1 / 256
CONFIGURATIONS = [(0, None), (1, 2), (2, 2)]  # (workers, prefetch)
EXPECTED = {0: 256.0, 1: 256.0, 2: 512.0}  # samples/s by workers


def measure(folder: Path, rounds: int, seconds: float) -> dict[int, float]:
    """The median samples/s over ``rounds`` of each configuration, by workers."""
    index = make_dataset(get_problem("fc_mnist", "debug"), folder, 103, 7)
    settings = LoaderSettings(batch_size=4, sample_cost_s=SAMPLE_COST_S)
    rates: dict[int, list[float]] = {workers: [] for workers, _ in CONFIGURATIONS}
    for _ in range(rounds):
        analysis = analyze_input(
            folder,
            index,
            settings,
            torch.device("cpu"),
            300.0,
            "given",
            configurations=CONFIGURATIONS,
            seconds=seconds,
        )
        for point in analysis.points:
            rates[point.workers].append(point.samples_per_sec)
    return {workers: statistics.median(values) for workers, values in rates.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0, help="timed seconds per configuration")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        medians = measure(Path(folder) / "d", args.rounds, args.seconds)
    print(f"{'workers':>7}  {'samples/s':>9}  {'expected':>8}  ratio")
    for workers, rate in medians.items():
        print(f"{workers:>7}  {rate:>9.1f}  {EXPECTED[workers]:>8.0f}  {rate / EXPECTED[workers]:.3f}")
    print(f"two workers / one: {medians[2] / medians[1]:.3f} (2.000 when they read concurrently)")
    figures = [
        Figure(f"{workers} workers", round(rate, 2), "samples/s", note=f"expected {EXPECTED[workers]:.0f}")
        for workers, rate in medians.items()
    ]
    figures += [
        Figure(f"{workers} workers / expected", round(rate / EXPECTED[workers], 4), "ratio", note="1: exact")
        for workers, rate in medians.items()
    ]
    two = round(medians[2] / medians[1], 4)
    figures.append(Figure("two workers / one", two, "ratio", note="2 when they read concurrently"))
    record("input_analyzer", figures, note=f"{args.rounds} rounds of {args.seconds} s")


if __name__ == "__main__":
    main()
