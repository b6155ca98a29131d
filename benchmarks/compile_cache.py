"""What the compile cache saves: `flowrate compile` cold and warm, each in a fresh process.

For each case, a new empty cache ($FLOWRATE_CACHE in a temporary folder), then `flowrate compile`
twice in fresh interpreters: the first compiles and saves (cold), the second finds inductor's FX
graphs, AOTAutograd entries and kernels on disk (warm). Prints the first step's seconds (tracing
and compiling, as the result's compile section records it) and the whole process's wall time.

    python benchmarks/compile_cache.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from record import Figure, record  # beside this script

CASES = [
    ("fc_mnist", "debug", "train"),
    ("transformer", "debug", "train"),
    ("transformer", "mini", "train"),
    ("resnet50", "debug", "train"),
    ("transformer", "mini", "infer"),
]
LAUNCH = "from flowrate.cli.main import main; main()"


def compile_once(problem: str, size: str, mode: str, cache: str) -> tuple[dict[str, object], float]:
    env = {**os.environ, "FLOWRATE_CACHE": cache}
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            LAUNCH,
            "compile",
            "-p",
            problem,
            "--size",
            size,
            "--mode",
            mode,
            "--json",
            "-q",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - start
    return json.loads(done.stdout)["compile"], wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.parse_args()
    print(
        f"{'case':26} {'cold s':>8} {'warm s':>8} {'saved':>7} {'cold wall':>10} {'warm wall':>10} {'hit':>5}"
    )
    figures: list[Figure] = []
    for problem, size, mode in CASES:
        with tempfile.TemporaryDirectory(prefix="flowrate-cache-") as cache:
            cold, cold_wall = compile_once(problem, size, mode, cache)
            warm, warm_wall = compile_once(problem, size, mode, cache)
        c, w = float(cold["compile_s"]), float(warm["compile_s"])  # type: ignore[arg-type]
        print(
            f"{problem + '/' + size + ' ' + mode:26} {c:>8.2f} {w:>8.2f} {1 - w / c:>7.0%} "
            f"{cold_wall:>10.2f} {warm_wall:>10.2f} {warm['cache_hit']!s:>5}",
            flush=True,
        )
        case, hit = f"{problem}/{size} {mode}", warm["cache_hit"]
        figures += [
            Figure(f"{case} compile, cold", round(c, 3), "s", note=f"wall {cold_wall:.2f} s"),
            Figure(f"{case} compile, warm", round(w, 3), "s", note=f"wall {warm_wall:.2f} s, hit {hit}"),
            Figure(f"{case} saved", round(1 - w / c, 4), "fraction"),
        ]
    record("compile_cache", figures)


if __name__ == "__main__":
    main()
