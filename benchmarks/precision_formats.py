"""Inference formats side by side: fp32, bf16, int8-weights (and int8-dynamic) on one problem,
samples/s from `flowrate run` and fidelity from `flowrate check`, each in a fresh process.

Throughput: `flowrate run --mode infer` per format, interleaved over --rounds in an order that
turns round each round (benchmarks/side_by_side.py's in_rounds), median samples/s, printed with
its ratio to fp32: the ratio of the means with its 95% interval (before side_by_side: the ratio of
the medians, each round in the same order). Fidelity: `flowrate check` per format (int8 formats: the model
trained in fp32, then evaluated quantized on the same held-out batches as fp32; bf16: its own
training curve), the loss reached.

    python benchmarks/precision_formats.py                         # transformer/mini
    python benchmarks/precision_formats.py --size debug --duration 2 --check-steps 100
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from functools import partial

from record import Figure, record  # beside this script
from side_by_side import SideBySide, in_rounds

FORMATS = ("fp32", "bf16", "int8-weights", "int8-dynamic")


def flowrate(*args: str) -> dict:
    command = [sys.executable, "-m", "flowrate", *args, "--no-store", "--json"]
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{done.stderr}")
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="transformer")
    parser.add_argument("--size", default="mini")
    parser.add_argument("--duration", default="5")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--check-steps", default="300")
    parser.add_argument("--threads", default="2")
    args = parser.parse_args()
    common = ["-p", args.problem, "--size", args.size, "--threads", args.threads]

    def rate(fmt: str) -> float:
        run = flowrate("run", *common, "--mode", "infer", "--precision", fmt, "--duration", args.duration)
        return float(run["summary"]["samples_per_sec"])

    rates = in_rounds({fmt: partial(rate, fmt) for fmt in FORMATS}, args.rounds)
    print(f"{args.problem}/{args.size}, infer, {args.rounds} interleaved rounds of {args.duration} s each")
    print(
        f"{'format':14} {'samples/s':>10} {'vs fp32':>8} {'loss reached':>13} {'fp32 same batches':>18}"
        "  vs fp32, 95% interval"
    )
    figures: list[Figure] = []
    for fmt in FORMATS:
        check = flowrate("check", *common, "--precision", fmt, "--steps", args.check_steps, "--lr", "1e-3")
        f = check["fidelity"]
        median = statistics.median(rates[fmt])
        compared = SideBySide(rates["fp32"], rates[fmt])
        found = compared.interval
        shown = f"[{found[0]:.2f}, {found[1]:.2f}]" if found and fmt != "fp32" else "-"
        reference = f"{f['reference_loss']:.4f}" if f.get("reference_loss") is not None else "-"
        print(
            f"{fmt:14} {median:10.1f} {compared.ratio:8.2f} {f['final_loss']:13.4f} {reference:>18}  {shown}"
        )
        figures += [
            Figure(f"{fmt} samples/s", median, "samples/s", note=f"median of {args.rounds} rounds"),
            Figure(
                f"{fmt} / fp32",
                round(compared.ratio, 4),
                "ratio",
                note=f"ratio of the means: {compared.describe()}",
            ),
            Figure(f"{fmt} loss reached", f["final_loss"], "loss", note=f"fp32, same batches: {reference}"),
        ]
    record("precision_formats", figures, note=f"{args.problem}/{args.size}, infer, {args.duration} s runs")


if __name__ == "__main__":
    main()
