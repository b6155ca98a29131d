"""Collective kernels across two real gloo processes, started as torchrun starts them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from test_data_parallel import FLOWRATE, launch

from flowrate.problems.kernels.collectives import bus_factor, collective_bandwidths
from flowrate.results.schema import Result


@pytest.mark.parametrize(
    ("operation", "size"),
    [
        ("allreduce", 1024),
        ("reducescatter", 4096),
        pytest.param("allgather", 4096, marks=pytest.mark.slow),  # ~12 s each on 2 shared cores
        pytest.param("broadcast", 8, marks=pytest.mark.slow),
    ],
)
def test_two_ranks_report_algorithm_and_bus_bandwidth(operation: str, size: int, tmp_path: Path) -> None:
    run = [*FLOWRATE, "run", "-p", operation, "-O", f"bytes={size}", "--preheat", "2", "--steps", "20",
           "--threads", "1", "--no-store", "--json"]  # fmt: skip
    first, second = launch([run, run], tmp_path)
    assert first.code == 0 and second.code == 0, first.stderr + second.stderr
    result = Result.from_json(first.stdout)
    d = result.distributed
    assert d is not None and d.world_size == 2 and d.backend == "gloo"
    assert result.problem.settings == {"operation": operation, "bytes": size}
    # bytes/s is the sum over ranks of each rank's S × calls/s: algbw is its mean over the ranks
    per_rank = [size * r.samples_per_sec for r in d.ranks]
    assert result.flops.bytes_per_sec == pytest.approx(sum(per_rank))
    algbw, busbw = collective_bandwidths(operation, result.flops.bytes_per_sec, 2)
    assert algbw == pytest.approx(sum(per_rank) / 2) and algbw > 0
    assert busbw == pytest.approx(algbw * bus_factor(operation, 2))


def test_a_size_that_does_not_split_over_the_ranks_is_one_line(tmp_path: Path) -> None:
    run = [*FLOWRATE, "run", "-p", "allgather", "-O", "bytes=12", "--steps", "2", "--no-store"]
    first, _ = launch([run, run], tmp_path)
    assert first.code == 2, first.stderr
    errors = [line for line in first.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "multiple of 8 bytes" in errors[0], first.stderr
    assert "Traceback" not in first.stderr


def test_the_all_reduce_sums_the_ranks_buffers(tmp_path: Path) -> None:
    worker = [sys.executable, str(Path(__file__).parent / "dp_worker.py"), "allreduce", str(tmp_path / "out")]
    for rank in launch([worker, worker], tmp_path):
        assert rank.code == 0, rank.stderr
    first, second = (torch.load(tmp_path / f"out-{r}.pt") for r in (0, 1))
    assert not torch.equal(first["before"], second["before"])  # the ranks start from their own data
    total = first["before"] + second["before"]  # what its summary says: "(sum)", not the max
    assert torch.equal(first["after"], total) and torch.equal(second["after"], total)
    assert not total.any()  # the ranks' data cancel: summed call after call, it stays finite
