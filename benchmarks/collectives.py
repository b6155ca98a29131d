"""gloo (or NCCL) all-reduce bandwidth over sizes at 2 processes: algbw and busbw as nccl-tests
defines them, one torchrun launch per size (flowrate.problems.kernels.collectives).

    python benchmarks/collectives.py                       # 8 B … 64 MiB, 2 ranks
    python benchmarks/collectives.py --op allgather --nproc 4 --duration 2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from flowrate.problems.kernels.collectives import collective_bandwidths
from flowrate.units import si
from record import Figure, record  # beside this script

SIZES = (8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", default="allreduce")
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--duration", default="3")
    args = parser.parse_args()
    print(f"{args.op}, {args.nproc} ranks; size: nccl-tests' S")
    print(f"{'size':>10} {'calls/s':>10} {'algbw':>12} {'busbw':>12}")
    figures: list[Figure] = []
    for size in SIZES:
        command = [
            sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(args.nproc),
            "-m", "flowrate", "run", "-p", args.op, "-O", f"bytes={size}", "--threads", "1",
            "--duration", args.duration, "--no-store", "--json",
        ]  # fmt: skip
        done = subprocess.run(command, check=False, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"failed: {' '.join(command)}\n{done.stderr[-2000:]}")
        result = json.loads(done.stdout)
        ranks = result["distributed"]["world_size"]
        algbw, busbw = collective_bandwidths(args.op, result["flops"]["bytes_per_sec"], ranks)
        calls = result["summary"]["samples_per_sec"] / ranks
        print(f"{si(size, 'B'):>10} {calls:10.1f} {si(algbw, 'B/s'):>12} {si(busbw, 'B/s'):>12}")
        figures += [
            Figure(f"{si(size, 'B')} calls", round(calls, 3), "calls/s"),
            Figure(f"{si(size, 'B')} algbw", round(algbw / 1e9, 4), "GB/s"),
            Figure(f"{si(size, 'B')} busbw", round(busbw / 1e9, 4), "GB/s", note="nccl-tests' definition"),
        ]
    record(f"collectives-{args.op}", figures, note=f"{args.nproc} ranks, --duration {args.duration}")


if __name__ == "__main__":
    main()
