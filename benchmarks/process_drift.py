"""Does this machine's speed carry over from one process to the next, and does pairing help?

`flowrate compare --budget` runs many short processes in A B B A blocks and tests B/A either
unpaired (Welch over the processes' values) or paired by block (flowrate.results.blocks). Which
is narrower depends on how the machine's speed moves: where one process's speed says much about
the next one's (drift on the scale of seconds), the blocks' log ratios cancel it and the paired
standard error is the smaller one.

This script runs PROCESSES fresh processes of one configuration in a row, each measuring SECONDS,
forked from a warm server as compare's are (flowrate.campaigns.process.child), and reads them as an
A/A comparison in A B B A order. It prints and records:

- the between-process CV of the per-process values (the median interval's samples/s);
- the lag-one correlation of the processes' log values, in run order (0: independent draws);
- the share of a process's variance its own intervals explain (within-process sampling);
- the paired and unpaired standard errors of log(B/A), their ratio, the drift F and the F above
  which flowrate pairs the blocks (pairing_threshold).

    python benchmarks/process_drift.py                                # fc_mnist, 60 × 0.5 s: about 1 min
    python benchmarks/process_drift.py --problem transformer --size mini --processes 40 --seconds 1
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from dataclasses import dataclass

import numpy as np

from flowrate.campaigns.process import child
from flowrate.config import RunConfig
from flowrate.results.blocks import block_test
from record import Figure, record  # beside this script

LEVEL = 0.95


def lag_one(values: np.ndarray) -> float:
    """The lag-one correlation of ``values`` in their order (the usual estimator)."""
    centred = values - values.mean()
    return float(np.sum(centred[1:] * centred[:-1]) / np.sum(centred * centred))


@dataclass(frozen=True)
class Drift:
    """Processes' values in run order, read as an A/A comparison in A B B A blocks."""

    between_cv: float
    correlation: float  # lag one, of the log values
    paired_se: float  # of log(B/A), over the blocks' log ratios
    unpaired_se: float  # of log(B/A), Welch over the processes
    drift_f: float
    threshold: float  # the F above which flowrate pairs the blocks
    paired: bool  # whether flowrate's block test pairs them


def analyse(values: list[float]) -> Drift:
    """``values`` (whole blocks of four, in run order) as flowrate's block test reads them."""
    logs = np.log(np.array(values))
    blocks = len(values) // 4
    order = np.array(list("ABBA" * blocks))
    la, lb = logs[order == "A"], logs[order == "B"]
    test = block_test(np.exp(la)[None], np.exp(lb)[None], 1 - LEVEL)
    ratios = lb.reshape(blocks, 2).mean(1) - la.reshape(blocks, 2).mean(1)
    return Drift(
        between_cv=float(np.std(values, ddof=1) / np.mean(values)),
        correlation=lag_one(logs),
        paired_se=float(ratios.std(ddof=1) / math.sqrt(blocks)),
        unpaired_se=float(math.sqrt(la.var(ddof=1) / len(la) + lb.var(ddof=1) / len(lb))),
        drift_f=float(test.drift_f[0]),
        threshold=test.threshold,
        paired=bool(test.paired[0]),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="fc_mnist")
    parser.add_argument("--size", default=None)
    parser.add_argument("--processes", type=int, default=60, help="a multiple of 4 (whole blocks)")
    parser.add_argument("--seconds", type=float, default=0.5, help="each process measures this long")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--preheat", type=int, default=5)
    args = parser.parse_args()
    if args.processes < 12 or args.processes % 4:
        parser.error("--processes: a multiple of 4, at least 12 (three blocks)")
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
    values, sampling, walls = [], [], []
    for _ in range(args.processes):
        started = time.monotonic()
        outcome = child.run_in_fresh_process(config)
        walls.append(time.monotonic() - started)
        assert outcome.result is not None, outcome.message
        summary = outcome.result.summary
        values.append(summary.median_samples_per_sec)
        sampling.append((summary.cv or 0.0) ** 2 * math.pi / 2 / max(summary.intervals, 1))
    drift = analyse(values)
    own = statistics.fmean(sampling) / drift.between_cv**2
    blocks = args.processes // 4
    figures = [
        Figure("between-process CV", round(100 * drift.between_cv, 2), "%"),
        Figure("lag-one correlation", round(drift.correlation, 3), "", note="of the log values in run order"),
        Figure("within-process sampling share", round(own, 3), "", note="of a process's variance"),
        Figure("paired standard error", round(100 * drift.paired_se, 3), "%", note=f"{blocks} blocks"),
        Figure("unpaired standard error", round(100 * drift.unpaired_se, 3), "%"),
        Figure("paired / unpaired standard error", round(drift.paired_se / drift.unpaired_se, 3), ""),
        Figure("block drift F", round(drift.drift_f, 2), "", note=f"paired above {drift.threshold:.2f}"),
        Figure("paired by flowrate", int(drift.paired), "yes = 1"),
        Figure("process wall time", round(statistics.median(walls), 3), "s", note="median"),
    ]
    for figure in figures:
        print(f"{figure.name:34} {figure.value:>9} {figure.unit:4} {figure.note}")
    where = f"{args.problem}{'/' + args.size if args.size else ''}"
    record(
        "process_drift",
        figures,
        note=f"{where}, {args.processes} processes of {args.seconds:g} s, {args.threads} thread(s)",
    )


if __name__ == "__main__":
    main()
