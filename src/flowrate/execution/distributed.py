"""Data-parallel runs through torch.distributed: one process per device, launched by torchrun.

Scaling out is a change of launcher, not of code. Under ``torchrun --nproc-per-node N -m flowrate
run …`` (or any launcher that sets torchrun's environment: RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT), `flowrate run`, ``flowrate.benchmark`` and ``flowrate.session`` run
data-parallel:

- process groups, every one with the timeout ``--dist-timeout``: NCCL on CUDA devices (rank r of
  a node uses cuda:LOCAL_RANK), gloo on CPUs; host tensors (the loop's agreements, the per-rank
  results) go through gloo, a second group when the default one is NCCL;
- every rank checks that it runs rank 0's configuration, and says which rank and field differ;
- training wraps the resident model in DistributedDataParallel; streaming averages each block's
  gradients with one all-reduce before the host update; inference communicates nothing;
- each rank makes its own synthetic data (seed + rank) or reads its own shards of a dataset;
- sample points fall at the same steps on every rank, and the ranks stop at the same step;
- rank 0 gathers every rank's result and merges it (flowrate.results.merge): throughput is the
  sum over ranks. Every rank returns the merged Result; only rank 0 prints, writes and records.

A failure must not hang the others: a collective that fails (a rank died: its connection closed)
or times out becomes one line that names the rank which stopped responding, or repeats the error
a rank reported before it left. Ranks leave notes in the rendezvous store for this; nothing is
written there while a run goes well.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import os
import platform
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from flowrate._version import __version__
from flowrate.config import AUTO, FLAG_NAMES, RunConfig
from flowrate.errors import ConfigError, FlowrateError, RunFailed
from flowrate.execution.launch import LAUNCH_VARIABLES, Launch, check_device_for_launch, launched, rank_device
from flowrate.execution.replicated import Replicated
from flowrate.problems.base import Problem
from flowrate.results.schema import Result

# The variables torchrun (and torch.distributed's env:// rendezvous) reads.
# After a collective fails, how long a rank waits for the others' notes before naming the silent.
NOTE_GRACE_S = 2.0
# Config fields that may differ between ranks: the device (cuda:LOCAL_RANK) and the timeout.
RANK_LOCAL_FIELDS = ("device", "dist_timeout_s")


def per_rank_batch_size(config: RunConfig, problem: Problem, world_size: int) -> int:
    """Samples per step on each rank: --batch-size as given, or --global-batch-size split evenly."""
    if config.global_batch_size is None:
        return int(config.batch_size or problem.default_batch_size)
    if config.global_batch_size % world_size:
        raise ConfigError(
            "global_batch_size",
            f"{config.global_batch_size} is not divisible by the world size {world_size}: give a multiple "
            f"of {world_size}, or --batch-size for the samples per rank",
        )
    return config.global_batch_size // world_size


def is_collective_failure(error: BaseException) -> bool:
    """Whether ``error`` is torch.distributed saying a peer is gone or too slow."""
    if isinstance(error, dist.DistError):
        return True
    text = str(error).lower()
    markers = ("gloo", "nccl", "connection reset", "connection closed", "timed out", "pair closure")
    return isinstance(error, RuntimeError) and any(m in text for m in markers)


class DataParallel:
    """This rank of a data-parallel run: its group, device, and the ranks' agreements."""

    def __init__(
        self,
        rank: int,
        world_size: int,
        local_rank: int,
        device: torch.device,
        timeout_s: float,
        store: Any = None,
        owns_group: bool = True,
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self.local_rank = local_rank
        self.device = device
        self.timeout_s = timeout_s
        self.owns_group = owns_group
        self.backend = str(dist.get_backend())

        def group(backend: str) -> Any:  # with the run's timeout: new_group's own default is 30 min
            return dist.new_group(backend=backend, timeout=dt.timedelta(seconds=timeout_s))

        # host tensors and Python objects go through gloo, whatever the default backend
        self.host_group: Any = None if self.backend == "gloo" else group("gloo")
        # streamed gradients are averaged during backward (on autograd's thread, on a GPU) while
        # another thread may be in a collective of its own: a group of their own, on the run's
        # backend, or the threads' collectives could interleave differently on different ranks
        self._gradient_group: Any = group(self.backend)
        self._store = store  # the rendezvous store, for failure notes (None: a group we did not make)
        self._notes: Any = None
        self._replicas: list[Replicated] = []

    @classmethod
    def start(cls, launch: Launch | None, device_name: str, timeout_s: float) -> DataParallel:
        """Join the launch's process group, or use the one the caller has initialized already."""
        timeout = dt.timedelta(seconds=timeout_s)
        if launch is not None:
            check_device_for_launch(device_name, launch, torch.cuda.device_count())
        if dist.is_initialized():  # the user's program made the group: use it, leave it to them
            if launch is not None:
                local = launch.local_rank
            else:  # started without torchrun (mp.spawn): the device the program chose, if CUDA
                local = torch.cuda.current_device() if torch.cuda.is_available() else 0
            device = rank_device(device_name, local)
            return cls(dist.get_rank(), dist.get_world_size(), local, device, timeout_s, owns_group=False)
        assert launch is not None
        device = rank_device(device_name, launch.local_rank)
        backend = "nccl" if device.type == "cuda" and dist.is_nccl_available() else "gloo"
        try:
            store, rank, world, generation = _rendezvous(timeout)
            store.set_timeout(timeout)
            dist.init_process_group(
                backend,
                store=dist.PrefixStore(f"default_pg/{generation}", store),
                rank=rank,
                world_size=world,
                timeout=timeout,
            )
        except (RuntimeError, ValueError) as error:  # DistError is a RuntimeError
            where = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
            raise RunFailed(
                f"rank {launch.rank} could not join the data-parallel run at {where} within "
                f"{timeout_s:g} s (--dist-timeout): {_first_line(error)}"
            ) from None
        return cls(rank, world, launch.local_rank, device, timeout_s, store=store)

    # --- agreeing before the run ------------------------------------------------------------------

    def check_same_configuration(self, config: RunConfig, problem: Problem) -> None:
        """Every rank must run rank 0's configuration; a difference names the rank and the field.

        The rendezvous token for failure notes travels with rank 0's description.
        """

        mine = {
            "token": uuid.uuid4().hex,
            "config": {k: v for k, v in config.to_dict().items() if k not in RANK_LOCAL_FIELDS},
            "problem": {"parameters": problem.parameter_count(), "settings": problem.describe()},
            "versions": {"flowrate": __version__, "torch": torch.__version__},
        }
        everyone = self.all_gather(mine)
        reference = everyone[0]
        if self._store is not None:
            self._notes = dist.PrefixStore(f"flowrate/{reference['token']}", self._store)
        for rank, theirs in enumerate(everyone[1:], start=1):
            _compare(rank, reference, theirs)

    def all_gather(self, value: Any) -> list[Any]:
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, value, group=self.host_group)
        return gathered

    # --- during the run -----------------------------------------------------------------------------

    def wrap(self, model: nn.Module) -> Replicated:
        """The model in DistributedDataParallel: gradients averaged over ranks during backward."""
        from torch.nn.parallel import DistributedDataParallel

        ids = [self.device.index] if self.device.type == "cuda" else None
        replicated = Replicated(model, DistributedDataParallel(model, device_ids=ids))
        self._replicas.append(replicated)
        return replicated

    def barrier(self) -> None:
        dist.barrier(group=self.host_group)

    def average_device_gradients(self, flat: torch.Tensor) -> None:
        """Streaming: average one block's flat gradients over ranks in place, on their device and in
        their dtype (bf16 stays bf16), on the run's backend: NCCL's mean, or gloo's sum ÷ world size.
        One thread at a time, every rank in the same order: the blocks share one group.
        """
        if flat.device.type == "cuda" and "nccl" in self.backend:
            dist.all_reduce(flat, op=dist.ReduceOp.AVG, group=self._gradient_group)
            return
        dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=self._gradient_group)
        flat.div_(self.world_size)

    def sample_every(self, mine: int) -> int:
        """The longest sample interval any rank chose: every interval lasts long enough."""
        value = torch.tensor([mine], dtype=torch.int64)
        dist.all_reduce(value, op=dist.ReduceOp.MAX, group=self.host_group)
        return int(value.item())

    def finished(self, mine: bool) -> bool:
        """Stop only when every rank has measured its minimum steps and duration."""
        value = torch.tensor([int(mine)], dtype=torch.int64)
        dist.all_reduce(value, op=dist.ReduceOp.MIN, group=self.host_group)
        return bool(value.item())

    # --- after the run ------------------------------------------------------------------------------

    def merge(self, result: Result) -> Result:
        """Every rank's result merged on rank 0 (throughput summed), then given to every rank."""
        from flowrate.results.merge import RankRun, merge_ranks

        mine = RankRun(
            rank=self.rank,
            local_rank=self.local_rank,
            hostname=platform.node() or socket.gethostname(),
            device=str(self.device),
            result=result.to_dict(),
        )
        gathered: list[Any] | None = [None] * self.world_size if self.rank == 0 else None
        dist.gather_object(mine, gathered, dst=0, group=self.host_group)
        box: list[Any] = [None]
        if gathered is not None:
            box[0] = merge_ranks(gathered, self.backend, self.timeout_s).to_dict()
        dist.broadcast_object_list(box, src=0, group=self.host_group)
        return Result.from_dict(box[0])

    def close(self) -> None:
        """Let go of every DistributedDataParallel (see Replicated), then of the process group."""
        for replicated in self._replicas:
            replicated.release()
        self._replicas.clear()
        gc.collect()  # DDP objects in reference cycles go now, while the group still exists
        if self.owns_group and dist.is_initialized():
            dist.destroy_process_group()
        self._store = self._notes = None

    # --- failures -------------------------------------------------------------------------------------

    def note_failure(self, message: str) -> None:
        """Tell the other ranks why this one is leaving (best effort: the store may be gone)."""
        self._note(message)

    def lost_contact(self, error: BaseException) -> RunFailed:
        """One line for a failed collective: which rank stopped responding, or what it reported."""
        self._note("")  # this rank is alive: the others must not name it
        reports, silent = self._read_notes()
        if reports:
            rank, message = reports[0]
            why = f"rank {rank} failed: {message}"
        elif silent:
            which = ", ".join(str(r) for r in silent)
            timed_out = "time" in str(error).lower()
            how = (
                f"no answer within the {self.timeout_s:g} s --dist-timeout: it hangs or is far slower"
                if timed_out
                else "its connection closed: it died or was killed; see its output"
            )
            why = f"rank {which} stopped responding ({how})"
        else:
            why = f"a collective failed: {_first_line(error)}"
        return RunFailed(f"the data-parallel run stopped on rank {self.rank}: {why}")

    def _note(self, message: str) -> None:
        if self._notes is None:
            return
        with contextlib.suppress(Exception):  # the store lives in a process that may be gone
            self._store.set_timeout(dt.timedelta(seconds=NOTE_GRACE_S))
            self._notes.set(f"note/{self.rank}", message)

    def _read_notes(self) -> tuple[list[tuple[int, str]], list[int]]:
        """(ranks that reported an error, with it; ranks that left no note) after a grace period."""
        others = [r for r in range(self.world_size) if r != self.rank]
        if self._notes is None:
            return [], []
        deadline = time.monotonic() + min(NOTE_GRACE_S, self.timeout_s)
        try:
            while True:
                present = [r for r in others if self._notes.check([f"note/{r}"])]
                if len(present) == len(others) or time.monotonic() >= deadline:
                    break
                time.sleep(0.1)
            reports = [(r, self._notes.get(f"note/{r}").decode()) for r in present]
        except Exception:  # the store went with the rank that hosted it (rank 0)
            return [], ([0] if self.rank != 0 else [])
        return [(r, m) for r, m in reports if m], [r for r in others if r not in present]


@contextlib.contextmanager
def data_parallel(config: RunConfig) -> Iterator[DataParallel | None]:
    """A DataParallel for a run launched by torchrun (or inside a user's process group), else None.

    Failures leave as one line: a collective that failed names the rank that stopped responding;
    this rank's own error is noted for the others first.
    """
    launch = launched()
    if launch is None and not (dist.is_available() and dist.is_initialized()):
        yield None
        return
    dp = DataParallel.start(launch, config.device, config.dist_timeout_s)
    try:
        yield dp
    except FlowrateError as error:
        dp.note_failure(str(error))
        raise
    except Exception as error:
        if is_collective_failure(error):
            raise dp.lost_contact(error) from None
        dp.note_failure(f"{type(error).__name__}: {_first_line(error)}")
        raise
    finally:
        dp.close()


@dataclass
class _Joined:
    """This process's rendezvous: its store, rank and world size, and the groups made in it."""

    store: Any
    rank: int
    world_size: int
    groups: int = 0


# Joined once per launch: (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE) -> the rendezvous.
_JOINED: dict[tuple[str | None, ...], _Joined] = {}


def _rendezvous(timeout: dt.timedelta) -> tuple[Any, int, int, int]:
    """The launch's store, rank and world size, and which process group of this process this is.

    A second run in the same process (flowrate.benchmark called twice under torchrun) re-creates
    its group in the store the first one used, whose keys are still there: under a prefix of its
    own (every rank counts the same runs), or it would read the first group's keys and hang.
    """
    key = tuple(os.environ.get(name) for name in LAUNCH_VARIABLES)
    if key not in _JOINED:
        _JOINED[key] = _Joined(*next(dist.rendezvous("env://", timeout=timeout)))
    joined = _JOINED[key]
    joined.groups += 1
    return joined.store, joined.rank, joined.world_size, joined.groups


def check_data_parallel_config(config: RunConfig) -> None:
    """What a data-parallel run cannot do, said before any work."""
    if config.batch_size == AUTO:
        raise ConfigError(
            "batch_size",
            "auto searches on one device; a data-parallel run needs the batch size per rank (find it "
            "with `flowrate run --batch-size auto` on one device)",
        )


def _compare(rank: int, reference: dict[str, Any], theirs: dict[str, Any]) -> None:
    for field, value in reference["config"].items():
        if theirs["config"].get(field) != value:
            raise ConfigError(
                FLAG_NAMES.get(field, field),
                f"{theirs['config'].get(field)!r} on rank {rank} but {value!r} on rank 0; every rank "
                "must run the same configuration",
            )
    if theirs["problem"] != reference["problem"]:
        raise ConfigError(
            "problem",
            f"rank {rank} built {theirs['problem']} but rank 0 {reference['problem']}: every rank must "
            "load the same problem",
        )
    for name, version in reference["versions"].items():
        if theirs["versions"][name] != version:
            raise FlowrateError(
                f"rank {rank} runs {name} {theirs['versions'][name]} but rank 0 runs {version}: install "
                "the same versions on every node"
            )


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__
