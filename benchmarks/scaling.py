"""Weak-scaling efficiency at 1 and 2 processes on this machine, and DDP's cost at world size 1.

For each case, in rounds (the order of the sizes turns round each round, so drift in the machine
hits every size alike: benchmarks/side_by_side.py's in_rounds):

    plain     `flowrate run` in a fresh process, no process group: the single-process baseline
    N ranks   `flowrate scaling`'s launch: torchrun --standalone --nproc-per-node N, the same
              per-rank batch; throughput is the sum over ranks (MEASUREMENT.md)

and reports medians over rounds of T(plain), T(1), T(2); efficiency = mean T(2) / (2 × mean T(1))
with its 95% interval (before side_by_side: the median of the per-round T(2) / (2 × T(1)), whose
range is still printed); and DDP's cost at world size 1 = 1 − T(1) / T(plain) of the medians (a
process group, DDP's gradient buckets and the all-reduce over one rank).

Every rank gets --threads 1 at every size (``--threads``), so 2 ranks use both cores of a
2-core machine without oversubscribing it, and 1 rank uses one: the resources per rank are the
same at both sizes, which is what weak scaling asks.

    python benchmarks/scaling.py                         # fc_mnist and transformer/mini, 3 rounds
    python benchmarks/scaling.py --rounds 1 --duration 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from flowrate.campaigns.process.child import run_in_fresh_process
from flowrate.campaigns.scaling.run import run_size
from flowrate.config import RunConfig
from record import Figure, record  # beside this script
from side_by_side import SideBySide, in_rounds


@dataclass(frozen=True)
class Case:
    label: str
    problem: str
    size: str | None
    batch_size: int


CASES = (
    Case("fc_mnist (784-512-512-10)", "fc_mnist", None, 128),
    Case("transformer/mini (4 layers, 256 wide, seq 128)", "transformer", "mini", 8),
)


def measure(case: Case, rounds: int, duration: float, threads: int) -> dict[str, tuple[float, ...]]:
    config = RunConfig(
        problem=case.problem,
        size=case.size,
        batch_size=case.batch_size,
        threads=threads,
        device="cpu",
        duration_s=duration,
        preheat_steps=3,
    )

    def plain() -> float:
        outcome = run_in_fresh_process(config)
        assert outcome.result is not None, outcome.message
        return outcome.result.summary.samples_per_sec

    with tempfile.TemporaryDirectory() as folder:

        def ranks(size: int) -> float:
            return run_size(config, size, Path(folder)).summary.samples_per_sec

        figures = in_rounds({"plain": plain, "1": partial(ranks, 1), "2": partial(ranks, 2)}, rounds)
    for round_, row in enumerate(zip(figures["plain"], figures["1"], figures["2"], strict=True)):
        print(
            f"  round {round_ + 1}: plain {row[0]:.1f}, 1 rank {row[1]:.1f}, 2 ranks {row[2]:.1f} samples/s"
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=8.0, help="timed seconds per run")
    parser.add_argument("--threads", type=int, default=1, help="threads per rank, at every size")
    args = parser.parse_args()
    rows = []
    figures: list[Figure] = []
    for case in CASES:
        print(f"{case.label}, batch {case.batch_size} per rank:", flush=True)
        f = measure(case, args.rounds, args.duration, args.threads)
        plain, one, two = (statistics.median(f[k]) for k in ("plain", "1", "2"))
        efficiencies = [b / (2 * a) for a, b in zip(f["1"], f["2"], strict=True)]
        scaled = SideBySide(f["1"], f["2"])
        efficiency = scaled.ratio / 2
        found = scaled.interval
        shown = f"95% {found[0] / 2:.1%}–{found[1] / 2:.1%}; " if found else ""
        rows.append(
            f"| {case.label} | {case.batch_size} | {plain:,.1f} | {one:,.1f} | {two:,.1f} | {two / 2:,.1f} "
            f"| **{efficiency:.1%}** ({shown}range {min(efficiencies):.1%}–{max(efficiencies):.1%}) "
            f"| {1 - one / plain:.1%} |"
        )
        low, high = min(efficiencies), max(efficiencies)
        figures += [
            Figure(f"{case.label} plain", plain, "samples/s", note=f"batch {case.batch_size}, 1 process"),
            Figure(f"{case.label} torchrun 1 rank", one, "samples/s"),
            Figure(f"{case.label} torchrun 2 ranks", two, "samples/s", note="the sum over ranks"),
            Figure(
                f"{case.label} weak-scaling efficiency",
                round(efficiency, 4),
                "fraction",
                note=f"ratio of the means / 2, 2 ranks / 1 rank {scaled.describe()}; per-round range "
                f"{low:.1%}-{high:.1%}",
            ),
            Figure(f"{case.label} DDP cost at world size 1", round(1 - one / plain, 4), "fraction"),
        ]
    print()
    print(
        "| case | batch per rank | plain 1 process (samples/s) | torchrun 1 rank | torchrun 2 ranks (sum) "
        "| per rank at 2 | weak-scaling efficiency (range) | DDP cost at world size 1 |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(row)
    shape = f"{args.rounds} rounds of {args.duration} s, {args.threads} thread(s) a rank"
    record("scaling", figures, note=shape)


if __name__ == "__main__":
    main()
