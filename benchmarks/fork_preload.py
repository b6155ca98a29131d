"""What the fork server's preload saves a campaign of short runs: `flowrate run --repeat N` of
fc_mnist at this checkout against the same command at an earlier commit (the one before the fork
server imported flowrate's run harness, by default), side by side.

Each side is the whole command a user types, `python -m flowrate run -p fc_mnist --repeat RUNS
--duration D --no-store`, timed from start to exit; the earlier commit runs from a temporary git
worktree (PYTHONPATH at its src). The two alternate in ABBA order (benchmarks/side_by_side.py),
``--rounds`` each. Printed: each side's median wall, after ÷ before with its interval, and the
seconds saved per run ((before − after) / RUNS): what each process of a `compare --budget` plan
no longer spends starting.

    python benchmarks/fork_preload.py                     # 4 rounds, 6 runs of 0.5 s
    python benchmarks/fork_preload.py --before 66a2c59 --rounds 6
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from record import Figure, record  # beside this script
from side_by_side import SideBySide, in_rounds

ROOT = Path(__file__).resolve().parent.parent
BEFORE = "66a2c59"  # the fork server imported torch (and dynamo) only


def wall(src: Path, runs: int, duration: float, store: str) -> float:
    """Seconds of `python -m flowrate run --repeat RUNS` with flowrate imported from ``src``."""
    env = dict(os.environ, PYTHONPATH=str(src), FLOWRATE_STORE=store)
    argv = ["run", "-p", "fc_mnist", "--repeat", str(runs), "--duration", str(duration), "--no-store"]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "flowrate", *argv, "--quiet"], env=env, capture_output=True, check=False
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"flowrate from {src} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default=BEFORE, help="the earlier commit (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--duration", type=float, default=0.5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tree = Path(folder) / "before"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), args.before], check=True
        )
        try:
            store = str(Path(folder) / "flowrate.db")
            sides = {
                "before": partial(wall, tree / "src", args.runs, args.duration, store),
                "after": partial(wall, ROOT / "src", args.runs, args.duration, store),
            }
            seen = in_rounds(sides, args.rounds)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True)
    ratio = SideBySide(tuple(seen["before"]), tuple(seen["after"]))
    median = {side: statistics.median(values) for side, values in seen.items()}
    saved = (median["before"] - median["after"]) / args.runs
    for side, values in seen.items():
        print(f"{side:6s} median {median[side]:.2f} s ({' '.join(f'{v:.2f}' for v in values)})")
    print(f"after / before: {ratio.describe()}; saved per run {saved:.2f} s")
    note = f"flowrate run -p fc_mnist --repeat {args.runs} --duration {args.duration}; before = {args.before}"
    record(
        "fork_preload",
        [
            Figure("command wall, before", round(median["before"], 2), "s", note=f"median of {args.rounds}"),
            Figure("command wall, after", round(median["after"], 2), "s", note=f"median of {args.rounds}"),
            Figure("after / before", round(ratio.ratio, 4), "ratio", note=ratio.describe()),
            Figure("saved per run", round(saved, 3), "s", note="difference of the medians over --repeat"),
        ],
        note=note,
    )


if __name__ == "__main__":
    main()
