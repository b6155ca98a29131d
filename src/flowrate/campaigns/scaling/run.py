"""Weak scaling on this machine: the same per-rank batch at 1, 2, 4… processes, through torchrun.

Success is linear scaling. Weak-scaling efficiency at N processes is

    efficiency(N) = throughput(N) / (N × throughput(1))

with throughput the sum over ranks of each rank's samples/s (MEASUREMENT.md): 1.0 is linear; the
shortfall is what communication, synchronization and shared resources cost. When 1 is not among
the sizes, the smallest size N₀ is the baseline: (T(N)/N) / (T(N₀)/N₀).

Each size is one `torchrun --standalone --nproc-per-node N` launch of the worker in
flowrate.cli.scaling_worker (rank 0 writes the merged Result to a file), so every size runs the same
code path: the size-1 point is DistributedDataParallel at world size 1. On a CPU the ranks share
the cores: unless --threads says otherwise each rank gets cores ÷ the largest size threads at
every size, so the largest size does not oversubscribe the machine and every rank has the same
resources.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from flowrate.campaigns.process.child import portable
from flowrate.config import RunConfig, positive_ints
from flowrate.errors import ConfigError, RunFailed
from flowrate.execution.launch import LAUNCH_VARIABLES
from flowrate.results.scaling_report import CommOverhead, ScalingPoint, ScalingReport
from flowrate.results.schema import Result

__all__ = ["CommOverhead", "ScalingPoint", "ScalingReport"]

# What torchrun launches for each size (`python -m WORKER_MODULE CONFIG.json RESULT.json`).
WORKER_MODULE = "flowrate.cli.scaling_worker"
# Seconds a size may take beyond its measured duration (start-up, model build, preheat) before
# the launch is stopped: a generous bound that only catches a launch that hangs.
LAUNCH_SLACK_S = 600.0


def parse_sizes(text: str) -> list[int]:
    """'1,2,4' -> [1, 2, 4]: distinct positive process counts, ascending."""
    return positive_ints(text, "nproc", "1,2,4")


def check_weak_scaling(config: RunConfig) -> None:
    if config.global_batch_size is not None:
        raise ConfigError(
            "global_batch_size",
            "weak scaling keeps the batch per rank: give --batch-size (the samples per step of each rank)",
        )
    if config.batch_size == "auto":
        raise ConfigError("batch_size", "give the per-rank batch size; auto searches on one device only")


def threads_per_rank(config: RunConfig, sizes: Sequence[int], cuda: bool) -> int | None:
    """CPU runs: --threads, or the cores shared evenly among the largest size's ranks."""
    if config.threads is not None or cuda:
        return config.threads
    return max(1, (os.cpu_count() or 1) // max(sizes))


def efficiency(results: Sequence[tuple[int, Result]], name: str, threads: int | None) -> ScalingReport:
    """Efficiency of each size against the smallest: per-rank throughput over the baseline's."""
    ordered = sorted(results, key=lambda item: item[0])
    base_n, base = ordered[0]
    base_per_rank = base.summary.samples_per_sec / base_n
    points = [
        ScalingPoint(
            processes=n,
            samples_per_sec=r.summary.samples_per_sec,
            samples_per_sec_per_rank=r.summary.samples_per_sec / n,
            efficiency=(r.summary.samples_per_sec / n) / base_per_rank if base_per_rank > 0 else 0.0,
            ideal_samples_per_sec=n * base_per_rank,
            run_id=r.run_id,
        )
        for n, r in ordered
    ]
    return ScalingReport(name, base_n, threads, points)


def launch_command(processes: int, config_file: Path, result_file: Path) -> list[str]:
    """torchrun on this machine, running the worker on ``config_file``."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={processes}",
        "-m",
        WORKER_MODULE,
        str(config_file),
        str(result_file),
    ]


def run_size(config: RunConfig, processes: int, workdir: Path) -> Result:
    """Launch ``processes`` ranks of ``config`` and return the merged Result rank 0 wrote."""
    config_file = workdir / f"config-{processes}.json"
    result_file = workdir / f"result-{processes}.json"
    config_file.write_text(json.dumps(portable(config).to_dict()))
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARIABLES}
    if config.threads is not None:
        env["OMP_NUM_THREADS"] = str(config.threads)  # what torchrun would otherwise set to 1
    limit = LAUNCH_SLACK_S + (config.duration_s if config.steps is None else 0.0)
    try:
        done = subprocess.run(
            launch_command(processes, config_file, result_file),
            env=env,
            capture_output=True,
            text=True,
            timeout=limit,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RunFailed(f"the {processes}-process run did not finish within {limit:g} s") from None
    if done.returncode != 0 or not result_file.exists():
        raise RunFailed(f"the {processes}-process run failed: {_error_line(done.stderr)}")
    return Result.load(result_file)


def run_scaling(
    config: RunConfig,
    sizes: Sequence[int],
    name: str,
    on_size: Callable[[int, Result], None] | None = None,
) -> tuple[ScalingReport, list[Result]]:
    """Every size, smallest first, each in its own torchrun launch; then the efficiencies."""
    results: list[tuple[int, Result]] = []
    with tempfile.TemporaryDirectory(prefix="flowrate-scaling-") as folder:
        for processes in sizes:
            result = run_size(config, processes, Path(folder))
            results.append((processes, result))
            if on_size is not None:
                on_size(processes, result)
    return efficiency(results, name, config.threads), [r for _, r in results]


def _error_line(stderr: str) -> str:
    """The worker's own one-line error, else the last line the launch printed."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    mine = [line for line in lines if line.startswith("error:")]
    if mine:
        return mine[0].removeprefix("error:").strip()
    return lines[-1] if lines else "no output"
