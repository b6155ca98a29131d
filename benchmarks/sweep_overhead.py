"""What does a sweep cost beyond the time it measures? Per-point overhead of `flowrate sweep`.

Runs a real sweep of fc_mnist (default size, training, CPU) over a few batch sizes through the
same code as `flowrate sweep` (each point in a freshly spawned process, recorded in a temporary
store) with a fixed --duration and --preheat, and times every point in the parent. For each
point:

    wall      the parent's wall clock from just before the point starts to its record committed
    measured  preheat_s + timed_duration_s from the point's Result: what the run itself measures
    overhead  wall - measured, split into
      start     spawn, interpreter start and imports (torch, flowrate) until the child's code runs
      setup     inside the child, besides the measured time: problem and model build, executed-FLOP
                count, environment, assembling the Result
      return    the Result back to the parent, and the worker process shut down
      store     recording the run and its point in one transaction

Target: a median overhead of at most 3 s per point.

    python benchmarks/sweep_overhead.py                    # 4 points, 2 s timed, 2 preheat steps
    python benchmarks/sweep_overhead.py --points 6 --duration 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from flowrate.campaigns.process.child import ChildOutcome
from flowrate.campaigns.process.executor import fresh_process_runner
from flowrate.campaigns.process.job import Job
from flowrate.campaigns.sweep.run import PointReport, SweepProgress, SweepStart, run_sweep
from flowrate.campaigns.sweep.spec import PlannedPoint, SweepSpec
from flowrate.results.store import Store
from record import Figure, Target, record  # beside this script

TARGET_S = 3.0


@dataclass
class PointTimes:
    started: float = 0.0  # parent, time.time(), just before the point's process is started
    returned: float = 0.0  # parent, when the runner returned
    recorded: float = 0.0  # parent, when the point was recorded
    outcome: ChildOutcome | None = None


class Timing:
    """A point runner and a sweep listener in one: wall-clock stamps around each point."""

    def __init__(self) -> None:
        self.points: list[PointTimes] = []
        self._run = fresh_process_runner(argv=sys.argv)

    def __call__(self, job: Job) -> ChildOutcome:
        times = PointTimes(started=time.time())
        outcome = self._run(job)
        times.returned, times.outcome = time.time(), outcome
        self.points.append(times)
        return outcome

    def begin(self, start: SweepStart) -> None:
        print(f"sweep of {start.total} points, each in a fresh process", file=sys.stderr)

    def starting(self, point: PlannedPoint, progress: SweepProgress) -> None:
        pass

    def recorded(self, report: PointReport, progress: SweepProgress) -> None:
        self.points[-1].recorded = time.time()
        print(f"  point {report.index}: {report.status} {report.reason or ''}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--points", type=int, default=4, help="batch sizes 32, 64, … (default 4)")
    parser.add_argument("--duration", type=float, default=2.0, help="--duration of each point (s)")
    parser.add_argument("--preheat", type=int, default=2, help="--preheat steps of each point")
    args = parser.parse_args()

    spec = SweepSpec(
        base={
            "problem": "fc_mnist",
            "device": "cpu",
            "duration_s": args.duration,
            "preheat_steps": args.preheat,
        },
        grid={"batch_size": tuple(32 * 2**i for i in range(args.points))},
    )
    timing = Timing()
    with tempfile.TemporaryDirectory() as folder, Store(Path(folder) / "sweep.db") as store:
        outcome = run_sweep(spec, store, runner=timing, listener=timing, argv=sys.argv)
    if outcome.exit_status != 0:
        sys.exit("a point failed; no overhead to report")

    header = (
        "point",
        "batch",
        "wall s",
        "measured s",
        "overhead s",
        "start s",
        "setup s",
        "return s",
        "store s",
    )
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    overheads = []
    for report, times in zip(outcome.reports, timing.points, strict=True):
        child = times.outcome
        assert child is not None and child.result is not None
        assert child.child_started is not None and child.child_finished is not None
        summary = child.result.summary
        wall = times.recorded - times.started
        measured = summary.preheat_s + summary.timed_duration_s
        overhead = wall - measured
        overheads.append(overhead)
        start = child.child_started - times.started
        setup = child.child_finished - child.child_started - measured
        back = times.returned - child.child_finished
        store_s = times.recorded - times.returned
        row = (wall, measured, overhead, start, setup, back, store_s)
        print(" | ".join([str(report.index), str(report.params["batch_size"]), *(f"{v:.2f}" for v in row)]))
    median = statistics.median(overheads)
    verdict = "PASS" if median <= TARGET_S else "FAIL"
    print(
        f"\nmedian overhead per point: {median:.2f} s (range {min(overheads):.2f}–{max(overheads):.2f} s); "
        f"target ≤ {TARGET_S:.0f} s: {verdict} ({median / TARGET_S:.2f} of the budget)"
    )
    spread = f"median of {len(overheads)} points; range {min(overheads):.2f}-{max(overheads):.2f} s"
    figures = [Figure("overhead per point", round(median, 3), "s", Target("<=", TARGET_S), spread)]
    record("sweep_overhead", figures, note=f"fc_mnist, --duration {args.duration}, --preheat {args.preheat}")


if __name__ == "__main__":
    main()
