"""Data-parallel runs over NCCL on the GPUs of a lent machine (`pytest -m gpu`).

They check that a torchrun launch picks NCCL and cuda:LOCAL_RANK, and that the result sums its
ranks. That needs two GPUs: at world size 1 there is no second rank to sum and no gradient to
reduce, so the test would prove nothing, and two ranks cannot share one GPU (each rank takes
cuda:LOCAL_RANK, and NCCL refuses two ranks on one device). On a machine with one GPU it is
therefore skipped, saying so; the gloo tests in tests/integration/test_data_parallel.py cover the
data-parallel logic on the CPU.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from flowrate.results.schema import Result

RANKS = 2
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        torch.cuda.device_count() < RANKS,
        reason="needs 2 GPUs: at world size 1 there are no ranks to sum, so it would prove nothing",
    ),
]


def torchrun(tmp_path: Path, *args: str) -> Result:
    """`flowrate run ARGS` on RANKS GPUs under torchrun: the merged Result rank 0 printed."""
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={RANKS}"]
    run = ["-m", "flowrate", "run", "-p", "transformer", "--size", "debug", "--precision", "bf16"]
    done = subprocess.run(
        [*launch, *run, *args, "--steps", "6", "--preheat", "2", "--json", "--no-store", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return Result.from_json(done.stdout)


@pytest.mark.parametrize("execution", ["resident", "streaming"])
def test_torchrun_on_the_gpus_uses_nccl_and_sums_the_ranks(tmp_path: Path, execution: str) -> None:
    result = torchrun(tmp_path, "--execution", execution)
    d = result.distributed
    assert d is not None and d.backend == "nccl" and d.world_size == RANKS
    assert [r.device for r in d.ranks] == [f"cuda:{r}" for r in range(RANKS)]
    assert result.summary.samples_per_sec == sum(r.samples_per_sec for r in d.ranks)


def test_measure_peak_under_torchrun_is_each_gpus_own(tmp_path: Path) -> None:
    # each rank's GEMM runs on its cuda:LOCAL_RANK, not refused by the launch check (issue 40.1)
    f = torchrun(tmp_path, "--measure-peak").flops
    assert f.measured_peak_flops is not None and f.measured_peak_flops > 0
    if f.peak_flops is not None:  # one GPU's GEMM, below its datasheet: not the ranks' sum
        assert f.measured_peak_flops < f.peak_flops
