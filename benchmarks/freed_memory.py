"""What does keeping freed host memory buy? `flowrate run --freed-memory keep` against `release`.

glibc hands large freed blocks back to the OS, so on a CPU each step's large tensors land on
fresh pages and pay their page faults again. flowrate releases it by default, as a plain PyTorch
process does, and advises `--freed-memory keep` on a CPU (flowrate.measure.freed_memory): this
script measures what that advice is worth. Each case runs with each setting in a fresh process (keeping
cannot be undone within one), the two alternating in ABBA order for several rounds
(benchmarks/side_by_side.py); the script prints each setting's median samples/s, the ratio of the
means keep / release with its 95% interval (before side_by_side: the median of the per-round
ratios) and the per-round ratios.

    python benchmarks/freed_memory.py                      # 4 cases, 3 rounds: about 5 minutes on 2 cores
    python benchmarks/freed_memory.py --rounds 5 --seconds 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from functools import partial

import torch

from flowrate.measure.freed_memory import describe
from record import Figure, record  # beside this script
from side_by_side import side_by_side

# name: flowrate run's arguments
CASES = {
    "transformer/mini infer b8": "-p transformer --size mini --mode infer --batch-size 8",
    "resnet50/default train b2": "-p resnet50 --size default --mode train --batch-size 2",
    "bert-base/debug train": "-p bert-base --size debug --mode train",
    "fc_mnist/default train": "-p fc_mnist --size default --mode train",
}
SETTINGS = ("release", "keep")  # side A, side B


def measure(args: list[str], setting: str, seconds: float) -> tuple[float, str]:
    """samples/s of one `flowrate run` in a fresh process, and what its allocator did."""
    command = [sys.executable, "-m", "flowrate", "run", *args, "--device", "cpu", "--freed-memory", setting]
    command += ["--duration", str(seconds), "--min-steps", "3", "--preheat", "3", "--json", "--no-store"]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    return float(result["summary"]["samples_per_sec"]), str(result["environment"]["freed_memory"])


def checked_rate(name: str, setting: str, seconds: float) -> float:
    """samples/s of case ``name`` run with ``setting``; exits where the allocator did otherwise."""
    rate, said = measure(CASES[name].split(), setting, seconds)
    if not said.startswith("kept" if setting == "keep" else "released"):
        sys.exit(f"{name}: asked {setting}, the run's allocator was {said!r}")
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per run")
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; allocator here: {describe()}")
    print(f"{'case':28s} {'release':>10s} {'keep':>10s} {'keep/release':>12s}  95% interval  per round")
    figures: list[Figure] = []
    for name in args.cases.split(","):
        release_run, keep_run = (partial(checked_rate, name, setting, args.seconds) for setting in SETTINGS)
        compared = side_by_side(release_run, keep_run, args.rounds)
        release, keep = statistics.median(compared.a), statistics.median(compared.b)
        rounds = " ".join(f"{k / r:.2f}" for r, k in zip(compared.a, compared.b, strict=True))
        found = compared.interval
        shown = f"[{found[0]:.2f}, {found[1]:.2f}]" if found else "(no interval)"
        print(
            f"{name:28s} {release:10.4g} {keep:10.4g} {compared.ratio:12.2f}  {shown}  {rounds}", flush=True
        )
        figures += [
            Figure(f"{name} release", release, "samples/s", note=f"median of {args.rounds} runs"),
            Figure(f"{name} keep", keep, "samples/s", note=f"median of {args.rounds} runs"),
            Figure(
                f"{name} keep / release",
                round(compared.ratio, 4),
                "ratio",
                note=f"ratio of the means, ABBA order: {compared.describe()}; per round {rounds}",
            ),
        ]
    record("freed_memory", figures, note=f"allocator here: {describe()}")


if __name__ == "__main__":
    main()
