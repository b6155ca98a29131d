"""One rank of the executor-level data-parallel tests, run as a script with torchrun's variables.

Trains each problem for STEPS steps, resident in DistributedDataParallel and then streamed with
gradients averaged over the ranks on the device (as flowrate run does it), on this rank's own
batches; saves every step's loss and the final weights of each to OUT-RANK.pt.
test_data_parallel.py compares them with one process training on the ranks' batches concatenated.
``dp_worker.py reduce OUT`` checks average_device_gradients and the groups' timeout instead;
``dp_worker.py peak OUT`` runs --measure-peak's GEMM inside a rank; ``dp_worker.py clip OUT``
streams with resident blocks and gradient clipping; ``dp_worker.py allreduce OUT`` makes one call
of the all-reduce problem.
"""

from __future__ import annotations

import os
import sys
import time

import torch

from flowrate.config import Mode, OptimizerName, Precision, RunConfig
from flowrate.execution.distributed import DataParallel, data_parallel
from flowrate.execution.precision import PrecisionPolicy
from flowrate.execution.replicated import unwrap
from flowrate.execution.resident import ResidentExecutor
from flowrate.execution.streaming import StreamingExecutor
from flowrate.harness.api import gemm_peak_run
from flowrate.problems.base import Batch
from flowrate.problems.registry import get_problem

PROBLEMS = ("fc_mnist", "transformer")
STEPS = 4
BATCH = 4  # per rank
LR = 1e-3


def batches(problem_name: str, rank: int) -> list[Batch]:
    """Rank ``rank``'s batch of every step; the same in every process that asks."""
    problem = get_problem(problem_name, "debug")
    return [
        problem.make_batch(BATCH, torch.device("cpu"), torch.Generator().manual_seed(1000 * step + rank))
        for step in range(STEPS)
    ]


def train(
    problem_name: str, execution: str, steps: list[Batch], dp: DataParallel | None
) -> tuple[list[float], torch.Tensor]:
    """Every step's loss and the final weights (flattened), fp32 on the CPU."""
    problem = get_problem(problem_name, "debug")
    torch.manual_seed(0)
    model = problem.build_model()
    policy = PrecisionPolicy(Precision.FP32, torch.device("cpu"))
    if execution == "streaming":
        reduce = dp.average_device_gradients if dp is not None else None
        streamed = StreamingExecutor(
            problem, model, policy, Mode.TRAIN, OptimizerName.ADAMW, LR, reduce_gradients=reduce
        )
        losses = [float(streamed.step(batch)) for batch in steps]
        streamed.finish()
        with streamed.master_weights() as masters:
            weights = torch.cat([p.detach().reshape(-1) for p in masters.parameters()])
        return losses, weights
    resident = ResidentExecutor(problem, model, policy, Mode.TRAIN, OptimizerName.ADAMW, LR)
    if dp is not None:
        resident.model = dp.wrap(resident.model)
    losses = [float(resident.step(batch)) for batch in steps]
    return losses, torch.cat([p.detach().reshape(-1) for p in unwrap(resident.model).parameters()])


def main(out: str) -> None:
    with data_parallel(RunConfig(device="cpu", dist_timeout_s=60)) as dp:
        assert dp is not None, "run with torchrun's variables set"
        saved = {}
        for name in PROBLEMS:
            mine = batches(name, dp.rank)
            for execution in ("resident", "streaming"):
                saved[(name, execution)] = train(name, execution, mine, dp)
        torch.save(saved, f"{out}-{dp.rank}.pt")


def reduce_main(out: str) -> None:
    """average_device_gradients on two ranks, each dtype; then a group made with a 3 s timeout
    while rank 1 stays away: rank 0 must hear of it after 3 s, not after new_group's 30 minutes."""
    with data_parallel(RunConfig(device="cpu", dist_timeout_s=60)) as dp:
        assert dp is not None, "run with torchrun's variables set"
        base = torch.tensor([0.5, -1.25, 3.0, 7.5])
        saved: dict[str, object] = {}
        for dtype in (torch.float32, torch.bfloat16):
            flat = (base * (2 * dp.rank + 1)).to(dtype)  # ranks hold 1x and 3x: the mean is 2x
            dp.average_device_gradients(flat)
            saved[str(dtype)] = flat
        impatient = DataParallel(dp.rank, dp.world_size, dp.local_rank, dp.device, 3.0, owns_group=False)
        if dp.rank == 1:
            time.sleep(120)  # alive, connected, and silent
        try:
            impatient.average_device_gradients(torch.ones(4))
            saved["timeout"] = "no error"
        except RuntimeError as error:  # DistError is a RuntimeError
            saved["timeout"] = str(error).splitlines()[0]
        torch.save(saved, f"{out}-{dp.rank}.pt")
        os._exit(0)  # rank 1 is still in its sleep: leave without tearing the groups down


def clip_main(out: str) -> None:
    """Streaming with its two end blocks resident and the gradients clipped, on this rank's batches:
    the final weights, which must be the same on every rank."""
    with data_parallel(RunConfig(device="cpu", dist_timeout_s=60)) as dp:
        assert dp is not None, "run with torchrun's variables set"
        problem = get_problem("transformer", "debug")
        torch.manual_seed(0)
        policy = PrecisionPolicy(Precision.FP32, torch.device("cpu"))
        streamed = StreamingExecutor(
            problem,
            problem.build_model(),
            policy,
            Mode.TRAIN,
            OptimizerName.ADAMW,
            LR,
            clip_grad_norm=0.05,  # well below the gradients' norm: every step clips
            reduce_gradients=dp.average_device_gradients,
            resident_blocks=2,
        )
        assert any(block.resident for block in streamed.blocks)
        assert not all(block.resident for block in streamed.blocks)
        for batch in batches("transformer", dp.rank)[:3]:
            streamed.step(batch)
        streamed.finish()
        with streamed.master_weights() as masters:
            weights = torch.cat([p.detach().reshape(-1) for p in masters.parameters()])
        torch.save(weights, f"{out}-{dp.rank}.pt")


def allreduce_main(out: str) -> None:
    """One call of the all-reduce problem: this rank's buffer before it, and after."""
    with data_parallel(RunConfig(device="cpu", dist_timeout_s=60)) as dp:
        assert dp is not None, "run with torchrun's variables set"
        problem = get_problem("allreduce", None, {"bytes": 64})
        generator = torch.Generator().manual_seed(dp.rank)
        big, small, _ = problem.make_batch(1, torch.device("cpu"), generator)
        before = big.clone()
        problem.loss(problem.build_model(), (big, small, torch.tensor(1)))
        torch.save({"before": before, "after": big}, f"{out}-{dp.rank}.pt")


def peak_main(out: str) -> None:
    """--measure-peak's GEMM inside a rank: this device's own run, not a merge of the ranks'."""
    with data_parallel(RunConfig(device="cpu", dist_timeout_s=60)) as dp:
        assert dp is not None, "run with torchrun's variables set"
        gemm = gemm_peak_run(RunConfig(device="cpu", threads=1), torch.device("cpu"))
        ranks = gemm.distributed.world_size if gemm.distributed is not None else 1
        torch.save({"ranks": ranks, "flops": gemm.summary.model_flops_per_sec}, f"{out}-{dp.rank}.pt")


if __name__ == "__main__":
    if sys.argv[1] == "reduce":
        reduce_main(sys.argv[2])
    elif sys.argv[1] == "peak":
        peak_main(sys.argv[2])
    elif sys.argv[1] == "clip":
        clip_main(sys.argv[2])
    elif sys.argv[1] == "allreduce":
        allreduce_main(sys.argv[2])
    else:
        main(sys.argv[1])
