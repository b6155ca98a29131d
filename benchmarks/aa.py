"""Does `flowrate compare --run` call differences that are not there, and find those that are?

Two halves, both real runs through the command a user types, interleaved A B B A in fresh
processes, RUNS a side:

- A/A: both sides run the same zoo problem (fc_mnist and transformer/mini, in turn). Any
  "faster" or "slower" verdict on samples/s is a false positive. Target (N = 40): at most 2.
- A/B: side B runs the same problem slowed by a wait in every step (benchmarks/aa_slow_problem.py),
  sized from the step before it so that B runs at 95% of A's samples/s under any load. A
  "slower" verdict is a detection. Target (N = 40): at least 36.

Verdicts use what `flowrate compare` uses: the runs' own spread, pooled with the store's history
of the configuration (every earlier comparison's runs are in the same store) when the runs are no
noisier than it.

Side B's problem file differs from A's, so those comparisons pass --force (the problem and its
shape are the same; only the file that builds it differs).

With --budget, each comparison is `compare --run … --budget DURATION` instead: flowrate chooses
the processes a side and their length (its plan, and whether it paired the blocks, are printed),
and each comparison's wall time is checked against the budget.

    python benchmarks/aa.py                           # N = 40 each: about 40 min on 2 cores
    python benchmarks/aa.py -n 4 --duration 1         # a quick check that it works
    python benchmarks/aa.py --budget 60s              # N = 40 each at 60 s: 80 min per problem
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scipy.special import stdtrit

from record import Figure, Target, record  # beside this script

HERE = Path(__file__).resolve().parent
PROBLEM_FILE = HERE / "aa_slow_problem.py"
BASES = ("fc_mnist", "transformer:mini")  # (problem:size) taken in turn
FALSE_POSITIVES_TARGET = 2 / 40
DETECTIONS_TARGET = 36 / 40
ALPHA = 0.05  # compare's default
NOISE = re.compile(r"between-run CV ([0-9.]+)%")


def power(cv: float, runs: int, slowdown: float) -> float:
    """The chance a two-sided test at ALPHA calls a ``slowdown`` when the per-run values have
    between-run CV ``cv`` and ``runs`` runs a side (normal approximation, known noise): what the
    machine's noise allows any method that uses the runs' values, whatever its details."""
    se = cv * math.sqrt(2 / runs)
    z = statistics.NormalDist().inv_cdf(1 - ALPHA / 2)
    return statistics.NormalDist().cdf(abs(math.log(1 - slowdown)) / se - z)


class Refused(Exception):
    """`compare --budget` found the budget too short on this machine at this moment."""


def flowrate(*args: str, env: dict[str, str]) -> str:
    """Run the flowrate command line; its stdout (a failure stops the benchmark, saying why; a
    budget found too short is Refused)."""
    command = [sys.executable, "-m", "flowrate", *args]
    done = subprocess.run(command, check=False, env=env, capture_output=True, text=True)
    if done.returncode == 2 and "error: --budget:" in done.stderr:
        raise Refused(done.stderr.strip().splitlines()[-1])
    if done.returncode != 0:
        sys.exit(f"flowrate {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def spec(factory: str, flags: str) -> str:
    """A side's `flowrate run` options: the problem file's factory and the run flags."""
    return f"-p {PROBLEM_FILE}:{factory} --device cpu {flags}"


def comparison(
    base: str, count: list[str], flags: str, slowdown: float | None, store: str, env: dict[str, str]
) -> dict[str, object]:
    """One interleaved comparison through `flowrate compare --run` (``count``: its --runs or
    --budget flag); its samples/s row, with the budget's report and the wall time it took."""
    slow = slowdown is not None
    side_env = {**env, "FLOWRATE_AA_BASE": base, "FLOWRATE_AA_SLOWDOWN": str(slowdown or 0.0)}
    b_factory = "make_slow_problem" if slow else "make_problem"
    args = ["compare", "--run", spec("make_problem", flags), spec(b_factory, flags), *count]
    args += ["--format", "json", "--store", store, *(["--force"] if slow else [])]
    started = time.perf_counter()
    compared = json.loads(flowrate(*args, env=side_env))
    row: dict[str, object] = next(m for m in compared["metrics"] if m["metric"] == "samples_per_sec")
    return {**row, "budget": compared.get("budget"), "wall_s": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=40, help="comparisons of each kind (A/A and A/B)")
    parser.add_argument("--runs", type=int, default=3, help="runs a side")
    parser.add_argument("--duration", type=float, default=2.0, help="seconds each run measures")
    parser.add_argument("--slowdown", type=float, default=0.05, help="B's planted slowdown")
    parser.add_argument(
        "--problems",
        default=",".join(BASES),
        help="zoo problems (problem:size) taken in turn, comma-separated",
    )
    parser.add_argument("--threads", type=int, help="--threads of every run [default: PyTorch's]")
    parser.add_argument("--budget", help="each comparison within this budget (60s, 2m) instead of --runs")
    parser.add_argument(
        "--wait-factor",
        type=float,
        help="B's wait as a share of its previous step's work [default: slowdown / (1 − slowdown)]: "
        "smaller where the measured B/A comes out below 1 − slowdown (aa_slow_problem.py)",
    )
    parser.add_argument("--out", type=Path, help="append each comparison as a JSON line to this file")
    args = parser.parse_args()
    threads = f" --threads {args.threads}" if args.threads else ""
    flags = (f"--duration {args.duration}" if args.budget is None else "") + threads
    count = ["--runs", str(args.runs)] if args.budget is None else ["--budget", args.budget]
    overran = refused = 0
    shape = f"{args.runs} runs a side ({flags})" if args.budget is None else f"budget {args.budget}"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    if args.wait_factor is not None:
        env["FLOWRATE_AA_FACTOR"] = str(args.wait_factor)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        store = str(Path(folder) / "aa.db")
        bases = args.problems.split(",")
        false_positives = detections = 0
        noise: list[float] = []  # each A/B comparison's between-run CV, as its verdict used it
        planted: list[float] = []  # each A/B comparison's B/A: the slowdown as measured
        for index in range(args.n):  # A/A and A/B alternate, so a stopped run has some of both
            for kind in ("A/A", "A/B"):
                base = bases[index % len(bases)]
                try:
                    row = comparison(base, count, flags, args.slowdown if kind == "A/B" else None, store, env)
                except Refused as refusal:
                    refused += 1
                    print(f"{kind} {index + 1:>3} {base:<17} refused: {refusal}", flush=True)
                    continue
                called = bool(row["significant"])
                false_positives += kind == "A/A" and called
                detections += kind == "A/B" and called and float(row["ratio"]) < 1  # type: ignore[arg-type]
                if args.out is not None:
                    line = {"kind": kind, "index": index + 1, "problem": base, **row}
                    with args.out.open("a") as out:
                        out.write(json.dumps(line) + "\n")
                if kind == "A/B":
                    planted.append(float(row["ratio"]))  # type: ignore[arg-type]
                    if found := NOISE.search(str(row["evidence"])):
                        noise.append(float(found.group(1)) / 100)
                print(
                    f"{kind} {index + 1:>3} {base:<17} B/A {row['ratio']:.4f} "
                    f"[{row['ci_low']:.4f}, {row['ci_high']:.4f}] p {row['p_value']:.3g}  {row['verdict']}"
                    f"  ({row['evidence']})",
                    flush=True,
                )
                if isinstance(budget := row["budget"], dict):
                    wall = float(row["wall_s"])  # type: ignore[arg-type]
                    overran += wall > budget["budget_s"]
                    plan = budget["plan"]["reason"] if budget["plan"] else "no plan"
                    print(
                        f"      {wall:.1f} s of {budget['budget_s']:g} s; {plan}; {budget['analysis']}",
                        flush=True,
                    )
    minutes = (time.perf_counter() - started) / 60
    print(
        f"\n{args.n} A/A comparisons, {shape}: "
        f"{false_positives} false positives (target ≤ {FALSE_POSITIVES_TARGET * args.n:.1f})"
    )
    print(
        f"{args.n} A/B comparisons with a {args.slowdown:.0%} slowdown: {detections} detected "
        f"(target ≥ {DETECTIONS_TARGET * args.n:.1f}); {minutes:.1f} min in all"
    )
    figures = []
    # the slowdown B's runs measured, over the A/B comparisons: is it the one asked for?
    if len(planted) >= 2:
        ratio, low, high = measured_ratio(planted)
        print(
            f"the planted slowdown as measured: B/A {ratio:.4f} (95% interval {low:.4f}-{high:.4f}, "
            f"geometric mean of {len(planted)} comparisons), asked for {1 - args.slowdown:.4f}"
        )
        figures.append(
            Figure(
                "A/B measured B/A",
                round(ratio, 4),
                "ratio",
                None,
                f"asked for {1 - args.slowdown:.4f}; 95% interval {low:.4f}-{high:.4f} over {len(planted)} "
                "comparisons: the slowdown the detections were counted at",
            )
        )
    figures += [
        Figure(
            "A/A false positives",
            false_positives,
            f"of {args.n}",
            Target("<=", round(FALSE_POSITIVES_TARGET * args.n, 3)),
        ),
        Figure(
            "A/B detections",
            detections,
            f"of {args.n}",
            Target(">=", round(DETECTIONS_TARGET * args.n, 3)),
            f"a {args.slowdown:.0%} slowdown planted in B",
        ),
        Figure("wall time", round(minutes, 1), "min"),
    ]
    if args.budget is not None:
        print(f"comparisons longer than the budget (the whole command, start to end): {overran}")
        print(f"comparisons refused (the budget too short for this machine's start-up then): {refused}")
        figures += [
            Figure("comparisons longer than the budget", overran, f"of {2 * args.n}", Target("==", 0)),
            Figure("comparisons refused", refused, f"of {2 * args.n}", note="the budget too short then"),
        ]
    elif noise:
        cv = statistics.median(noise)
        chance = power(cv, args.runs, args.slowdown)
        print(
            f"the A/B comparisons' median between-run CV {cv:.1%}: at that noise, {args.runs} runs a side "
            f"detect a {args.slowdown:.0%} slowdown with probability {chance:.2f} (about "
            f"{chance * args.n:.0f} of {args.n}); {DETECTIONS_TARGET:.0%} needs a CV of at most "
            f"{_cv_for(DETECTIONS_TARGET, args.runs, args.slowdown):.1%}"
        )
        figures += [
            Figure("A/B median between-run CV", round(cv, 4), "fraction"),
            Figure("power at that CV", round(chance, 3), "probability", note="normal approximation"),
        ]
    factor = "" if args.wait_factor is None else f"; wait factor {args.wait_factor:g}"
    record("aa", figures, note=f"{shape}; problems {args.problems}{factor}")


def measured_ratio(ratios: list[float]) -> tuple[float, float, float]:
    """The geometric mean of the A/B comparisons' B/A and its 95% t interval: the slowdown B's
    runs actually had, which the detections are counted at."""
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    half = float(stdtrit(len(logs) - 1, 0.975)) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def _cv_for(target: float, runs: int, slowdown: float) -> float:
    """The largest between-run CV at which power() reaches ``target``."""
    z = statistics.NormalDist().inv_cdf(1 - ALPHA / 2) + statistics.NormalDist().inv_cdf(target)
    return abs(math.log(1 - slowdown)) / (z * math.sqrt(2 / runs))


if __name__ == "__main__":
    main()
