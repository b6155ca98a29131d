"""What the hardware does at its simplest: GEMM FLOP/s and memory / host-link bandwidth.

Runs flowrate's kernel problems on this machine's device and prints each figure with its
fraction of the datasheet peak (empty, with the reason, where the device has no table entry —
any CPU). On a GPU it adds bf16 GEMM and host<->device copies, pinned and pageable, each direction
alone and both at once: weight streaming depends on these.

    python benchmarks/kernels.py                  # the device flowrate picks (CUDA when present)
    python benchmarks/kernels.py --seconds 5
"""

from __future__ import annotations

import argparse
from typing import Any

import torch

import flowrate
from flowrate.units import si
from record import Figure, record  # beside this script

# (label, problem, precision, options) per device type
CPU_CASES: list[tuple[str, str, str, dict[str, int]]] = [
    ("gemm 1024³ fp32", "gemm", "fp32", {"m": 1024, "n": 1024, "k": 1024}),
    ("gemm 2048³ fp32", "gemm", "fp32", {"m": 2048, "n": 2048, "k": 2048}),
    ("gemm 4096³ fp32", "gemm", "fp32", {"m": 4096, "n": 4096, "k": 4096}),
    ("gemm 2048³ bf16", "gemm", "bf16", {"m": 2048, "n": 2048, "k": 2048}),
    ("copy 256 MiB fp32", "copy", "fp32", {"mib": 256}),
]
GPU_CASES: list[tuple[str, str, str, dict[str, int]]] = [
    ("gemm 8192³ bf16", "gemm", "bf16", {"m": 8192, "n": 8192, "k": 8192}),
    ("gemm 16384³ bf16", "gemm", "bf16", {"m": 16384, "n": 16384, "k": 16384}),
    ("gemm 8192³ fp32 (TF32 off)", "gemm", "fp32", {"m": 8192, "n": 8192, "k": 8192}),
    ("gemm 8192³ tf32", "gemm", "tf32", {"m": 8192, "n": 8192, "k": 8192}),
    ("copy 2 GiB", "copy", "bf16", {"mib": 2048}),
    *[
        (f"{kind} 1 GiB {'pinned' if pinned else 'pageable'}", kind, "fp32", {"mib": 1024, "pinned": pinned})
        for kind in ("h2d", "d2h", "duplex")
        for pinned in (1, 0)
    ],
]


def measure(problem: str, precision: str, options: dict[str, int], seconds: float) -> dict[str, Any]:
    result = flowrate.benchmark(
        problem,
        precision=precision,
        problem_options=options,
        duration_s=seconds,
        min_steps=5,
        preheat_steps=3,
    )
    f = result.flops
    return {
        "median_calls_per_sec": result.summary.median_samples_per_sec,
        "cv": result.summary.cv,
        "flops_per_sec": f.model_flops_per_sec if f.model_flops_per_sample else None,
        "fraction_of_peak": f.mfu if f.model_flops_per_sample else f.bandwidth_fraction,
        "bytes_per_sec": f.bytes_per_sec,
        "reason": f.reason if f.model_flops_per_sample else None,
        "device": result.environment.device_name,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per case")
    args = parser.parse_args()
    cases = GPU_CASES if torch.cuda.is_available() else CPU_CASES
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'case':34} {'achieved':>16} {'of peak':>8} {'CV':>6}")
    figures: list[Figure] = []
    for label, problem, precision, options in cases:
        row = measure(problem, precision, options, args.seconds)
        achieved = (
            si(row["flops_per_sec"], "FLOP/s") if row["flops_per_sec"] else si(row["bytes_per_sec"], "B/s")
        )
        share = f"{row['fraction_of_peak']:.1%}" if row["fraction_of_peak"] is not None else "—"
        print(f"{label:34} {achieved:>16} {share:>8} {row['cv']:>6.1%}")
        flops = row["flops_per_sec"]
        value, unit = (flops / 1e9, "GFLOP/s") if flops else (row["bytes_per_sec"] / 1e9, "GB/s")
        peak = f"{row['fraction_of_peak']:.1%} of peak" if row["fraction_of_peak"] is not None else "no peak"
        figures.append(Figure(label, round(value, 3), unit, note=f"{peak}; CV {row['cv']:.1%}"))
    print(f"device: {row['device']}")
    record("kernels", figures)


if __name__ == "__main__":
    main()
