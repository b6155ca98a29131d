"""The collective kernels' bandwidth arithmetic (nccl-tests' definitions) and their refusals."""

from __future__ import annotations

import pytest
import torch

from flowrate.errors import ConfigError
from flowrate.problems.kernels.collectives import _check_fits, bus_factor, collective_bandwidths
from flowrate.problems.registry import get_problem


@pytest.mark.parametrize(
    ("operation", "ranks", "factor"),
    [
        ("allreduce", 2, 1.0),  # 2(n-1)/n
        ("allreduce", 8, 1.75),
        ("allgather", 4, 0.75),  # (n-1)/n
        ("reducescatter", 8, 0.875),
        ("broadcast", 8, 1.0),
        ("allreduce", 1, 0.0),
    ],
)
def test_bus_factor_is_nccl_tests(operation: str, ranks: int, factor: float) -> None:
    assert bus_factor(operation, ranks) == factor


def test_bandwidths_from_a_merged_result() -> None:
    # 4 ranks each moving 1 GiB-sized all-reduces at 2 calls/s: summed bytes/s = 4 × 2 GiB/s
    algbw, busbw = collective_bandwidths("allreduce", 4 * 2 * 2**30, 4)
    assert algbw == 2 * 2**30 and busbw == 2 * 2**30 * 1.5


def test_a_collective_outside_torchrun_is_refused(run_cli) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("run", "-p", "allreduce", "--size", "debug", "--no-store")
    assert outcome.code == 2
    assert (
        outcome.stderr.strip()
        .splitlines()[-1]
        .startswith("error: --problem: allreduce measures a collective")
    )
    assert "torchrun" in outcome.stderr and "Traceback" not in outcome.stderr


def test_a_size_beyond_free_memory_is_refused_before_allocating() -> None:
    with pytest.raises(ConfigError, match=r"free host memory is .*lower -O bytes"):
        _check_fits(2**62, torch.device("cpu"))


def test_sizes_and_a_bad_size() -> None:
    assert (
        get_problem("allreduce", "large", {}).bytes_per_sample(get_problem("allreduce").default_mode) == 2**30
    )
    with pytest.raises(ConfigError, match="bytes"):
        get_problem("broadcast", None, {"bytes": 0})


def test_the_run_table_line() -> None:
    from flowrate.cli.run_text import collective_line
    from flowrate.results.sections import Distributed

    line = collective_line("allgather", 4e9, Distributed(world_size=4, backend="nccl"))
    assert line == "algbw 1 GB/s  busbw 750 MB/s  (4 ranks, nccl)"
