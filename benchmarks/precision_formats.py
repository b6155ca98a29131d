"""Inference formats side by side: fp32, bf16, int8-weights (and int8-dynamic) on one problem,
samples/s from `flowrate run` and fidelity from `flowrate check`, each in a fresh process.

Throughput: `flowrate run --mode infer` per format, interleaved over --rounds, median samples/s,
printed with its ratio to fp32. Fidelity: `flowrate check` per format (int8 formats: the model
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

from record import Figure, record  # beside this script

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
    rates: dict[str, list[float]] = {f: [] for f in FORMATS}
    for _ in range(args.rounds):
        for fmt in FORMATS:
            run = flowrate("run", *common, "--mode", "infer", "--precision", fmt, "--duration", args.duration)
            rates[fmt].append(run["summary"]["samples_per_sec"])
    print(f"{args.problem}/{args.size}, infer, {args.rounds} interleaved rounds of {args.duration} s each")
    print(f"{'format':14} {'samples/s':>10} {'vs fp32':>8} {'loss reached':>13} {'fp32 same batches':>18}")
    base = statistics.median(rates["fp32"])
    figures: list[Figure] = []
    for fmt in FORMATS:
        check = flowrate("check", *common, "--precision", fmt, "--steps", args.check_steps, "--lr", "1e-3")
        f = check["fidelity"]
        median = statistics.median(rates[fmt])
        reference = f"{f['reference_loss']:.4f}" if f.get("reference_loss") is not None else "-"
        print(f"{fmt:14} {median:10.1f} {median / base:8.2f} {f['final_loss']:13.4f} {reference:>18}")
        figures += [
            Figure(f"{fmt} samples/s", median, "samples/s", note=f"median of {args.rounds} rounds"),
            Figure(f"{fmt} / fp32", round(median / base, 4), "ratio"),
            Figure(f"{fmt} loss reached", f["final_loss"], "loss", note=f"fp32, same batches: {reference}"),
        ]
    record("precision_formats", figures, note=f"{args.problem}/{args.size}, infer, {args.duration} s runs")


if __name__ == "__main__":
    main()
