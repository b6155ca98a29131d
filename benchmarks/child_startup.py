"""What a fresh process per run costs: spawned (a new interpreter imports torch for every run)
against forked from flowrate's fork server (torch imported once), side by side in one run.

Each round runs the same short training run once each way, in ABBA order (spawn, server,
server, spawn, ...: benchmarks/side_by_side.py) so that drift on a shared machine falls on both.
A run's start-up is the time from the caller starting its process to the run's first line in the
child (ChildOutcome's child_started); its wall time is the caller's, start to answer. The first
run through the server, which starts it (and imports torch there), is reported on its own and
left out of the medians: a campaign pays it once.

    python benchmarks/child_startup.py                   # 6 rounds, transformer debug, 1 s runs
    python benchmarks/child_startup.py --rounds 10 --duration 10

The ratios forkserver / spawn of wall time and of throughput are ratios of the means with their 95%
intervals (before side_by_side: the ratio of the medians, the throughput's with a Mann-Whitney p).

Also printed: each way's median throughput (the same work: the ratio should be 1 within noise)
and median peak resident set (the CPU's peak memory figure), which differs because a spawned
child's own import of torch passes through a transient peak that a forked child never has.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import astuple, dataclass
from functools import partial

from flowrate.campaigns.process.child import ChildOutcome, run_in_fresh_process
from flowrate.config import RunConfig
from flowrate.results.metrics import peak_memory_bytes
from record import Figure, record  # beside this script
from side_by_side import SideBySide, in_rounds

WAYS = ("spawn", "forkserver")


@dataclass(frozen=True)
class Run:
    """One run started one way."""

    startup: float  # s, from the caller starting its process to the child's first line
    wall: float  # s, the caller's, start to answer
    peak: float  # bytes, peak resident set
    rate: float  # median samples/s


def one(config: RunConfig, way: str) -> Run:
    """One run started ``way``."""
    launched = time.time()
    outcome: ChildOutcome = run_in_fresh_process(config, start_method=way)
    wall = time.time() - launched
    if outcome.result is None or outcome.child_started is None:
        raise SystemExit(f"the {way} run failed: {outcome.message}")
    result = outcome.result
    rate = result.summary.median_samples_per_sec
    return Run(outcome.child_started - launched, wall, float(peak_memory_bytes(result) or 0), rate)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--duration", type=float, default=1.0)
    parser.add_argument("--problem", default="transformer")
    args = parser.parse_args()
    config = RunConfig(
        problem=args.problem, size="debug", mode="train", device="cpu", duration_s=args.duration, threads=1
    )
    first = one(config, "forkserver")
    print(
        f"first run through the server (starts it): start-up {first.startup:.2f} s, wall {first.wall:.2f} s"
    )
    seen = in_rounds({way: partial(one, config, way) for way in WAYS}, args.rounds)
    median = {way: [statistics.median(astuple(x)[i] for x in seen[way]) for i in range(4)] for way in WAYS}
    for way in WAYS:
        startup, wall, peak, rate = median[way]
        print(
            f"{way:10s} median start-up {startup:.3f} s  wall {wall:.2f} s  peak RSS {peak / 2**20:.0f} MiB"
            f"  {rate:.0f} samples/s"
            f"  ({args.rounds} runs: start-up {' '.join(f'{x.startup:.2f}' for x in seen[way])})"
        )
    for way in WAYS:
        way_rates = [x.rate for x in seen[way]]
        cv = statistics.stdev(way_rates) / statistics.mean(way_rates) if len(way_rates) > 1 else 0.0
        print(f"{way:10s} samples/s per run (CV {cv:.1%}): {' '.join(f'{r:.0f}' for r in way_rates)}")
    spawned, forked = seen["spawn"], seen["forkserver"]
    walls = SideBySide(tuple(x.wall for x in spawned), tuple(x.wall for x in forked))
    rates = SideBySide(tuple(x.rate for x in spawned), tuple(x.rate for x in forked))
    (s_up, _, s_peak, _), (f_up, _, f_peak, _) = median["spawn"], median["forkserver"]
    print(
        f"forkserver / spawn: wall {walls.describe()}, start-up saved {s_up - f_up:.2f} s per run, "
        f"peak RSS {f_peak / s_peak:.2f} ({(f_peak - s_peak) / 2**20:+.0f} MiB), "
        f"samples/s {rates.describe()}"
    )
    runs = f"median of {args.rounds} runs"
    figures = [
        figure
        for way in WAYS
        for figure in (
            Figure(f"{way} start-up", round(median[way][0], 3), "s", note=runs),
            Figure(f"{way} wall", round(median[way][1], 3), "s", note=runs),
            Figure(f"{way} peak RSS", round(median[way][2] / 2**20, 1), "MiB", note=runs),
            Figure(f"{way} samples/s", round(median[way][3], 2), "samples/s", note=runs),
        )
    ]
    figures += [
        Figure(
            "forkserver/spawn wall",
            round(walls.ratio, 4),
            "ratio",
            note=f"ratio of the means: {walls.describe()}",
        ),
        Figure("start-up saved per run", round(s_up - f_up, 3), "s"),
        Figure(
            "forkserver/spawn rate",
            round(rates.ratio, 3),
            "ratio",
            note=f"ratio of the means: {rates.describe()}",
        ),
    ]
    record("child_startup", figures, note=f"{args.problem}/debug train, --duration {args.duration}")


if __name__ == "__main__":
    main()
