"""Data-parallel runs over NCCL on the GPUs of a lent machine (`pytest -m gpu`).

Written without a GPU to run them on (none was lent to the issue that added them): they check
that a torchrun launch picks NCCL and cuda:LOCAL_RANK, and that the result sums its ranks.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from flowrate.results.schema import Result

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("execution", ["resident", "streaming"])
def test_torchrun_on_the_gpus_uses_nccl_and_sums_the_ranks(tmp_path: Path, execution: str) -> None:
    ranks = min(2, torch.cuda.device_count())
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={ranks}",
            "-m",
            "flowrate",
            "run",
            *("-p", "transformer", "--size", "debug", "--precision", "bf16", "--execution", execution),
            *("--steps", "6", "--preheat", "2", "--json", "--no-store", "-q"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = Result.from_json(done.stdout)
    d = result.distributed
    assert d is not None and d["backend"] == "nccl" and d["world_size"] == ranks
    assert [r["device"] for r in d["ranks"]] == [f"cuda:{r}" for r in range(ranks)]
    assert result.summary.samples_per_sec == sum(r["samples_per_sec"] for r in d["ranks"])
