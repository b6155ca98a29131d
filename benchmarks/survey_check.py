"""Issue 40's CPU benchmarks of `flowrate survey`: its --quick wall time, its matmul maximum
against --measure-peak's GEMM at the same precision (target >= 0.95), and two surveys back to
back (target: every figure within their own spread, as `flowrate compare` of two surveys says).

    python benchmarks/survey_check.py              # survey, the GEMMs, survey again; ~1 minute
    python benchmarks/survey_check.py --full       # without --quick

Runs the CLI in fresh processes against a store of its own, and prints the load average before
and after (the development VM is shared: a busy neighbour moves every figure).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from record import Figure, Target, record  # beside this script

PRECISIONS = ("fp32", "bf16")


def flowrate(*argv: str, env: dict[str, str]) -> tuple[dict[str, Any], float]:
    """`python -m flowrate ARGV --json`'s record and the command's wall seconds."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "flowrate", *argv], env=env, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"flowrate {' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
    return json.loads(done.stdout), seconds


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="survey without --quick")
    args = parser.parse_args()
    quick = () if args.full else ("--quick",)
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, FLOWRATE_STORE=str(Path(folder) / "flowrate.db"))
        print(f"load average before: {load()}")
        first, first_s = flowrate("survey", *quick, "--json", "--quiet", env=env)
        peaks = {}
        for precision in PRECISIONS:
            run, _ = flowrate(
                "run", "-p", "fc_mnist", "--size", "debug", "--precision", precision, "--measure-peak",
                "--steps", "2", "--preheat", "1", "--no-store", "--json", "--quiet", env=env,
            )  # fmt: skip
            peaks[precision] = run["flops"]["measured_peak_flops"]
        second, second_s = flowrate("survey", *quick, "--json", "--quiet", env=env)
        compared, _ = flowrate("compare", first["run_id"], second["run_id"], "--format", "json", env=env)
        print(f"load average after: {load()}")
    print(f"survey {first['run_id']}: {first_s:.1f} s wall; survey {second['run_id']}: {second_s:.1f} s wall")
    figures = {f["name"]: f for f in first["survey"]["figures"]}
    recorded = [
        Figure("survey wall time, first", round(first_s, 1), "s", note=" ".join(quick) or "full"),
        Figure("survey wall time, second", round(second_s, 1), "s", note=" ".join(quick) or "full"),
    ]
    for precision, peak in peaks.items():
        matmul = figures[f"matmul {precision}"]
        print(
            f"matmul {precision}: {matmul['value'] / 1e9:.1f} GFLOP/s ({matmul['detail']}); "
            f"--measure-peak GEMM {peak / 1e9:.1f} GFLOP/s; ratio {matmul['value'] / peak:.3f}"
        )
        recorded += [
            Figure(f"matmul {precision}", matmul["value"] / 1e9, "GFLOP/s", note=str(matmul["detail"])),
            Figure(f"--measure-peak GEMM {precision}", peak / 1e9, "GFLOP/s"),
            Figure(
                f"matmul {precision} / --measure-peak",
                round(matmul["value"] / peak, 4),
                "ratio",
                Target(">=", 0.95),
            ),
        ]
    agree = [row for row in compared["figures"] if row["within_spread"] is not None]
    within = sum(row["within_spread"] for row in agree)
    print(f"two surveys back to back: {within} of {len(agree)} figures within their spread")
    for row in agree:
        cv = [f.get("cv") for f in (figures[row["name"]], _named(second, row["name"]))]
        print(
            f"  {row['name']}: B/A {row['ratio']:.3f}, CVs {cv[0]:.1%} / {cv[1]:.1%}: "
            + ("within" if row["within_spread"] else "OUTSIDE")
        )
    outside = [row["name"] for row in agree if not row["within_spread"]]
    recorded.append(
        Figure(
            "figures outside their spread, two surveys back to back",
            len(outside),
            f"of {len(agree)}",
            Target("==", 0),
            ", ".join(outside),
        )
    )
    record("survey_check", recorded)


def _named(record: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in record["survey"]["figures"] if f["name"] == name)


if __name__ == "__main__":
    main()
