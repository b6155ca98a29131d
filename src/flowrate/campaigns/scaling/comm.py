"""What `flowrate scaling`'s efficiency shortfall should be if gradient all-reduce were all of it.

DistributedDataParallel all-reduces every gradient each step: G = parameters × gradient dtype
bytes. At N > 1 processes the study measures an all-reduce of G bytes under the same torchrun
launch (the allreduce kernel, flowrate.problems.kernels.collectives), giving its bus bandwidth
busbw as nccl-tests defines it. One all-reduce of G bytes takes G / algbw = G × 2(N−1)/N / busbw
(algbw = busbw ÷ bus_factor), the predicted step overhead. The measured overhead is the per-rank
step time at N processes minus the baseline's, each the merged run's global batch ÷ its summed
samples/s.
DDP overlaps the all-reduce with backward, so measured below predicted means overlap hid part of
it; above means costs other than the all-reduce (synchronization, shared cores).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from flowrate.campaigns.scaling.run import CommOverhead, run_size
from flowrate.config import Precision, RunConfig
from flowrate.problems.kernels.collectives import bus_factor, collective_bandwidths
from flowrate.results.schema import Result

# Seconds the all-reduce kernel is timed at each size: enough intervals for a steady rate.
ALLREDUCE_SECONDS = 2.0


def gradient_bytes(parameters: int, precision: Precision) -> int:
    """Bytes DDP all-reduces per step: bf16 gradients under pure-bf16, fp32 (master) otherwise."""
    return parameters * (2 if precision == Precision.PURE_BF16 else 4)


def predicted_overhead_s(grad_bytes: int, busbw_bytes_per_sec: float, processes: int) -> float:
    """Seconds one all-reduce of ``grad_bytes`` takes at ``busbw`` over ``processes`` ranks."""
    return grad_bytes * bus_factor("allreduce", processes) / busbw_bytes_per_sec


def step_time_s(global_batch: int, samples_per_sec_sum: float) -> float:
    """Seconds per step of a merged run: its samples per step over all ranks ÷ its summed samples/s."""
    return global_batch / samples_per_sec_sum


def allreduce_config(config: RunConfig, grad_bytes: int) -> RunConfig:
    """The allreduce kernel at the gradient size (a whole number of fp32 elements), on the
    study's device and threads, timed briefly."""
    return RunConfig(
        problem="allreduce",
        problem_options={"bytes": -(-grad_bytes // 4) * 4},
        device=config.device,
        threads=config.threads,
        duration_s=ALLREDUCE_SECONDS,
    )


def explain(config: RunConfig, results: Sequence[tuple[int, Result]]) -> list[CommOverhead]:
    """For each size above the baseline, measure the all-reduce busbw and compare overheads."""
    ordered = sorted(results, key=lambda item: item[0])
    base = ordered[0][1]
    base_step = step_time_s(base.batch_size, base.summary.samples_per_sec)
    grad = gradient_bytes(int(base.problem.parameters or 0), config.precision)
    explained = []
    with tempfile.TemporaryDirectory(prefix="flowrate-allreduce-") as folder:
        for n, result in ordered[1:]:
            measured = run_size(allreduce_config(config, grad), n, Path(folder))
            _, busbw = collective_bandwidths("allreduce", measured.flops.bytes_per_sec or 0.0, n)
            explained.append(
                CommOverhead(
                    processes=n,
                    gradient_bytes=grad,
                    busbw_bytes_per_sec=busbw,
                    predicted_s=predicted_overhead_s(grad, busbw, n) if busbw > 0 else float("nan"),
                    measured_s=step_time_s(result.batch_size, result.summary.samples_per_sec) - base_step,
                )
            )
    return explained
