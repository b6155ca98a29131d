"""Do two processes that take turns see less of the machine's drift than two run one after another?

`flowrate compare --budget` runs a block's processes, where it can, as two pairs that take turns
interval by interval (flowrate.campaigns.process.turns), and tests B/A pair by pair. This script
measures what that buys, side by side in one run: PAIRS times, one pair of a configuration's
processes that take turns, then one pair of the same processes one after another (who goes first
alternates), each process measuring SECONDS, all forked from the same warm server. Both sides run
the same configuration, so every log ratio log(B/A) is noise. It prints and records:

- the CV of a pair's ratio, taking turns and one after another, and their ratio (below 1: taking
  turns is steadier);
- the between-process CV (each process's value against the rest of its kind);
- the median wall time of a pair, both ways (taking turns should cost no more).

    python benchmarks/turns.py                                       # fc_mnist, 20 × 2 s: about 5 min
    python benchmarks/turns.py --problem transformer --size mini --pairs 10 --seconds 4
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import numpy as np

from flowrate.campaigns.process import child
from flowrate.config import RunConfig
from record import Figure, record  # beside this script


@dataclass(frozen=True)
class PairNoise:
    """Pairs of one configuration's processes, read as A/A comparisons."""

    ratio_cv: float  # the standard deviation of log(B/A) over the pairs
    between_cv: float  # of the processes' values, every process of the kind together
    mean_log_ratio: float


def pair_noise(a: list[float], b: list[float]) -> PairNoise:
    """Pair i is (a[i], b[i]): the spread of their log ratios and of the values themselves."""
    la, lb = np.log(np.array(a)), np.log(np.array(b))
    ratios = lb - la
    values = np.concatenate([a, b])
    return PairNoise(
        ratio_cv=float(ratios.std(ddof=1)),
        between_cv=float(values.std(ddof=1) / values.mean()),
        mean_log_ratio=float(ratios.mean()),
    )


def _value(outcome: child.ChildOutcome) -> float:
    assert outcome.result is not None, outcome.message
    return outcome.result.summary.median_samples_per_sec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="fc_mnist")
    parser.add_argument("--size", default=None)
    parser.add_argument("--pairs", type=int, default=20, help="pairs of each kind, at least 3")
    parser.add_argument("--seconds", type=float, default=2.0, help="each process measures this long")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--preheat", type=int, default=3)
    args = parser.parse_args()
    if args.pairs < 3:
        parser.error("--pairs: at least 3")
    config = RunConfig(
        problem=args.problem,
        size=args.size,
        device="cpu",
        threads=args.threads,
        duration_s=args.seconds,
        min_steps=1,
        preheat_steps=args.preheat,
    )
    child.run_in_fresh_process(config)  # starts the fork server; not counted
    kinds = ("taking turns", "one after another")
    values: dict[str, tuple[list[float], list[float]]] = {kind: ([], []) for kind in kinds}
    walls: dict[str, list[float]] = {kind: [] for kind in kinds}
    for index in range(args.pairs):
        for kind in kinds:
            started = time.monotonic()
            if kind == "taking turns":
                outcomes = child.run_in_turns(config, config, argv=(["a"], ["b"]))
            else:
                outcomes = (child.run_in_fresh_process(config), child.run_in_fresh_process(config))
            walls[kind].append(time.monotonic() - started)
            a, b = (_value(o) for o in outcomes)
            if index % 2:  # who goes first alternates: B then A
                a, b = b, a
            values[kind][0].append(a)
            values[kind][1].append(b)
    read = {kind: pair_noise(*values[kind]) for kind in kinds}
    turns, apart = read["taking turns"], read["one after another"]
    figures = [
        Figure("pair-ratio CV, taking turns", round(100 * turns.ratio_cv, 2), "%"),
        Figure("pair-ratio CV, one after another", round(100 * apart.ratio_cv, 2), "%"),
        Figure(
            "taking turns / one after another",
            round(turns.ratio_cv / apart.ratio_cv, 3),
            "",
            note="pair-ratio CV",
        ),
        Figure("between-process CV, taking turns", round(100 * turns.between_cv, 2), "%"),
        Figure("between-process CV, one after another", round(100 * apart.between_cv, 2), "%"),
        Figure(
            "pair wall time, taking turns",
            round(statistics.median(walls["taking turns"]), 2),
            "s",
            note="median",
        ),
        Figure(
            "pair wall time, one after another",
            round(statistics.median(walls["one after another"]), 2),
            "s",
            note="median",
        ),
    ]
    for figure in figures:
        print(f"{figure.name:40} {figure.value:>9} {figure.unit:3} {figure.note}")
    where = f"{args.problem}{'/' + args.size if args.size else ''}"
    if turns.ratio_cv > 0:
        worth = (apart.ratio_cv / turns.ratio_cv) ** 2
        print(f"one pair taking turns tells as much as {worth:.1f} pairs one after another")
    record(
        "turns",
        figures,
        note=f"{where}, {args.pairs} pairs of each kind, each process {args.seconds:g} s, "
        f"{args.threads} thread(s)",
    )


if __name__ == "__main__":
    main()
