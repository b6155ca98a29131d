"""Collective kernels: allreduce, allgather, reducescatter, broadcast across the ranks of a
torchrun launch (gloo on CPUs, NCCL on GPUs: the run's own process group). One sample is one
collective call. All-reduce sums, in place, as nccl-tests' in-place run does. Summed into itself
call after call, a buffer would grow n-fold a call (past fp16's range in some 16 calls, and the
run stops at a loss that is not finite), so its ranks hold small integers that cancel: ranks in
pairs hold v and -v (an odd one out holds zeros), every partial sum is an exact integer in any
order of reduction, and the buffer is all zeros after the first call, and stays so. The bytes
moved and the reduction's work are those of any data.

Sizes and bandwidths follow nccl-tests (doc/PERFORMANCE.md, github.com/NVIDIA/nccl-tests): the
size S (``-O bytes=S``) is the operation's size as nccl-tests prints it — the buffer of an
all-reduce or a broadcast, the gathered output of an all-gather (each rank sends S/n), the input
of a reduce-scatter (each rank keeps S/n). bytes_per_sample() is S, so a rank's bytes/s is the
algorithm bandwidth algbw = S / t; the bus bandwidth busbw = algbw × bus_factor(op, n), with the
factor 2(n−1)/n for all-reduce, (n−1)/n for all-gather and reduce-scatter and 1 for broadcast,
is comparable with the hardware's link bandwidth whatever the rank count.

A merged data-parallel Result sums bytes/s over ranks (results/merge.py), so algbw is that sum
over the world size (the mean over ranks): collective_bandwidths() does that arithmetic.

The sweep over sizes (8 B to 1 GiB, as nccl-tests' -b 8 -e 1G) is one launch per size, e.g.
``for s in 8 1024 1048576 1073741824; do torchrun --nproc-per-node 2 -m flowrate run -p
allreduce -O bytes=$s; done``: a `flowrate sweep` point runs in a fresh single process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from flowrate.config import Mode
from flowrate.errors import ConfigError
from flowrate.problems.base import Batch, Family
from flowrate.problems.kernels.base import KernelProblem, call_count, repeat_calls, require_positive
from flowrate.units import gib

OPERATIONS = ("allreduce", "allgather", "reducescatter", "broadcast")


def bus_factor(operation: str, ranks: int) -> float:
    """busbw / algbw for ``operation`` over ``ranks`` ranks (nccl-tests, doc/PERFORMANCE.md)."""
    if ranks < 1:
        raise ConfigError("ranks", f"must be a positive integer, got {ranks!r}")
    factors = {
        "allreduce": 2 * (ranks - 1) / ranks,
        "allgather": (ranks - 1) / ranks,
        "reducescatter": (ranks - 1) / ranks,
        "broadcast": 1.0,
    }
    if operation not in factors:
        raise ConfigError("problem", f"unknown collective {operation!r}; use one of {', '.join(OPERATIONS)}")
    return factors[operation]


def collective_bandwidths(operation: str, summed_bytes_per_sec: float, ranks: int) -> tuple[float, float]:
    """(algbw, busbw) in bytes/s from a merged Result's bytes/s (summed over ``ranks`` ranks)."""
    algbw = summed_bytes_per_sec / ranks
    return algbw, algbw * bus_factor(operation, ranks)


@dataclass(frozen=True)
class CollectiveConfig:
    bytes: int

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        require_positive(self, "bytes")


class Collective(KernelProblem):
    """One collective of ``bytes`` (nccl-tests' size) per call across the run's process group."""

    config: CollectiveConfig
    bandwidth_kind = "collective"  # no datasheet peak: busbw is read against the link by the user

    def __init__(self, config: CollectiveConfig, operation: str) -> None:
        super().__init__(config)
        self.name = operation

    def _world(self) -> int:
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
            raise ConfigError(
                "problem",
                f"{self.name} measures a collective between processes: launch 2 or more under torchrun, "
                f"e.g. torchrun --nproc-per-node 2 -m flowrate run -p {self.name}",
            )
        return dist.get_world_size()

    def _elements(self, ranks: int) -> int:
        """Elements of the operation's size S, refused unless S splits into whole elements per rank."""
        unit = self.element_size * (ranks if self.name in ("allgather", "reducescatter") else 1)
        if self.config.bytes % unit:
            raise ConfigError(
                "bytes", f"{self.name} over {ranks} ranks in {self.dtype} needs a multiple of {unit} bytes"
            )
        return self.config.bytes // self.element_size

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        ranks = self._world()
        elements = self._elements(ranks)
        share = elements // ranks
        kept = {"allreduce": 0, "broadcast": 0, "allgather": share, "reducescatter": share}[self.name]
        _check_fits((elements + kept) * self.element_size, device)
        if self.name == "allreduce":
            big = _cancelling(elements, self.dtype, device, ranks)
        else:
            big = self._randn((elements,), device, generator)
        small = self._randn((kept,), device, generator) if kept else big[:0]
        return big, small, call_count(batch_size)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        big, small, calls = batch
        op: Any = {
            "allreduce": lambda: dist.all_reduce(big, op=dist.ReduceOp.SUM),
            "broadcast": lambda: dist.broadcast(big, src=0),
            "allgather": lambda: dist.all_gather_into_tensor(big, small),
            "reducescatter": lambda: dist.reduce_scatter_tensor(small, big),
        }[self.name]
        repeat_calls(calls, op)
        return (small if self.name == "reducescatter" else big)[0].clone()

    def forward_flops_per_sample(self) -> int:
        return 0  # communication: see bytes_per_sample

    def bytes_per_sample(self, mode: Mode) -> int | None:
        return self.config.bytes

    def describe(self) -> dict[str, Any]:
        return {"bytes": self.config.bytes, "operation": self.name}


def _cancelling(elements: int, dtype: torch.dtype, device: torch.device, ranks: int) -> torch.Tensor:
    """This rank's all-reduce buffer: the same integers in [-8, 8] on every rank, times +1 on even
    ranks and -1 on odd ones (0 on the last of an odd count), so that they sum to exactly zero."""
    rank = dist.get_rank()
    sign = 0 if ranks % 2 and rank == ranks - 1 else 1 - 2 * (rank % 2)
    values = torch.randint(-8, 9, (elements,), generator=torch.Generator().manual_seed(0), dtype=torch.int8)
    return values.to(device=device, dtype=dtype).mul_(sign)


def _check_fits(need: int, device: torch.device) -> None:
    """Refuse a size whose buffers exceed the free memory of ``device``, before allocating them."""
    if device.type == "cuda":
        free = torch.cuda.mem_get_info(device)[0]
        where = "free device memory"
    else:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        where = "free host memory"
    if need > free:
        raise ConfigError(
            "bytes",
            f"the buffers need {gib(need)} per rank and {where} is {gib(free)}: lower -O bytes",
        )


def _family(operation: str, summary: str) -> Family:
    return Family(
        name=operation,
        summary=summary,
        sizes={
            "default": CollectiveConfig(bytes=64 << 20),
            "debug": CollectiveConfig(bytes=1 << 10),
            "large": CollectiveConfig(bytes=1 << 30),
        },
        default_size="default",
        build=lambda config: Collective(config, operation),
        options=("bytes",),
    )


FAMILIES: tuple[Family, ...] = (
    _family("allreduce", "kernel: all-reduce (sum) of bytes across the torchrun ranks; algbw and busbw"),
    _family("allgather", "kernel: all-gather into bytes (each rank sends bytes/n); algbw and busbw"),
    _family("reducescatter", "kernel: reduce-scatter of bytes (each rank keeps bytes/n); algbw and busbw"),
    _family("broadcast", "kernel: broadcast of bytes from rank 0; algbw and busbw"),
)
