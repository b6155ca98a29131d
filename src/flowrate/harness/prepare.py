"""What a run measures, built before the clock starts: the model, its executor and its batches.

With ``--batch-size auto`` the batch size is searched for: halved from ``max_batch_size`` until
one trial step fits in device memory. On a CPU each trial is held to the host memory available
(flowrate.measure.memory.host_memory_cap), so a batch too large fails its allocation instead of
having the process killed by the kernel.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from flowrate.config import AUTO, RunConfig
from flowrate.data.feed import DataFeed, open_feed
from flowrate.errors import FlowrateError, OutOfMemory
from flowrate.execution.base import Executor
from flowrate.execution.distributed import DataParallel, per_rank_batch_size
from flowrate.execution.factory import build_device, make_executor
from flowrate.execution.precision import PrecisionPolicy
from flowrate.measure.device import is_out_of_memory, release_memory, synchronizer
from flowrate.measure.loop import BatchStream
from flowrate.measure.memory import host_memory_cap
from flowrate.problems.base import Batch, Problem
from flowrate.results.assemble import Built
from flowrate.results.sections import BatchSizeTry
from flowrate.units import gib

# Distinct synthetic batches cycled through the timed loop, all made before the clock starts.
BATCH_POOL = 2


@dataclass
class Prepared:
    """What a run measures: the executor, its batches, and what was built."""

    executor: Executor
    batches: Sequence[Batch]
    built: Built

    @property
    def feed(self) -> DataFeed | None:
        """The data loader's feed when the batches come from --data (its waits are timed)."""
        return self.batches if isinstance(self.batches, DataFeed) else None


def prepare_with_batch_search(
    config: RunConfig, problem: Problem, policy: PrecisionPolicy, data: str, dp: DataParallel | None = None
) -> Prepared:
    """Build model, executor and batches; with batch size "auto", halve until one step fits."""
    if config.batch_size != AUTO:
        batch_size = per_rank_batch_size(config, problem, dp.world_size if dp is not None else 1)
        with oom_says_what_to_lower(batch_size, policy.device):
            return prepare(config, problem, policy, batch_size, data, trial_step=False, dp=dp)
    search: list[BatchSizeTry] = []
    batch_size = config.max_batch_size
    cap: int | None = None
    while batch_size >= 1:
        try:
            with host_memory_cap(policy.device) as cap:
                prepared = prepare(config, problem, policy, batch_size, data, trial_step=True)
        except Exception as error:
            if not is_out_of_memory(error):
                raise
            search.append(BatchSizeTry(batch_size, fits=False))
            release_memory(policy.device)
            batch_size //= 2
            continue
        search.append(BatchSizeTry(batch_size, fits=True))
        note = _capped_note(search, cap)
        prepared.built = dataclasses.replace(prepared.built, batch_size_search=search, search_note=note)
        return prepared
    where = f"the {gib(cap)} of host memory available" if cap is not None else str(policy.device)
    raise OutOfMemory(
        f"not even batch size 1 fits in {where}: use a smaller --size, --precision bf16, "
        "or a device with more memory"
    )


def _capped_note(search: list[BatchSizeTry], cap: int | None) -> str | None:
    """On a CPU, which batch sizes did not fit in the host memory each trial was held to."""
    failed = [str(a.batch_size) for a in search if not a.fits]
    if cap is None or not failed:
        return None
    return (
        f"--batch-size auto: each trial step was held to the {gib(cap)} of host memory available; "
        f"{', '.join(failed)} did not fit, {search[-1].batch_size} did (--max-batch-size sets "
        "where the search starts)"
    )


def prepare(
    config: RunConfig,
    problem: Problem,
    policy: PrecisionPolicy,
    batch_size: int,
    data: str,
    trial_step: bool,
    dp: DataParallel | None = None,
) -> Prepared:
    """Model, executor and batches; a data-parallel rank reduces gradients with the others and
    makes its own data (seed + rank; a dataset's loader reads the rank's own shards)."""
    device = policy.device
    home = build_device(config, problem, device)
    torch.manual_seed(config.seed)
    with home:
        model = problem.build_model()
    parameters_built = sum(p.numel() for p in model.parameters())
    block_count = _count_blocks(problem, model)
    executor = make_executor(config, problem, model, policy, dp=dp)
    seed = config.seed + (dp.rank if dp is not None else 0)
    generator = torch.Generator(device=device).manual_seed(seed)
    batches: Sequence[Batch]
    if data == "learnable":
        batches = LearnableStream(problem, batch_size, device, generator)
    elif config.data_dir is not None:  # --data: each step's batch from the loader
        batches = open_feed(config, problem, batch_size, device, generator)
    else:
        batches = [problem.make_batch(batch_size, device, generator) for _ in range(BATCH_POOL)]
    if trial_step:
        executor.step(batches[0])
        synchronizer(device)()
    return Prepared(executor, batches, Built(batch_size, parameters_built, block_count))


class LearnableStream(BatchStream):
    """An endless sequence of fresh learnable batches: item i is made when step i asks for it."""

    def __init__(
        self, problem: Problem, batch_size: int, device: torch.device, generator: torch.Generator
    ) -> None:
        self.problem = problem
        self.batch_size = batch_size
        self.device = device
        self.generator = generator

    def next_batch(self) -> Batch:
        return self.problem.learnable_batch(self.batch_size, self.device, self.generator)


@contextlib.contextmanager
def oom_says_what_to_lower(batch_size: int, device: torch.device) -> Iterator[None]:
    """Turn an out-of-memory failure into a one-line OutOfMemory that says what to lower."""
    try:
        yield
    except Exception as error:
        if not is_out_of_memory(error):
            raise
        raise OutOfMemory(
            f"out of memory at batch size {batch_size} on {device}: lower --batch-size, use "
            "--precision bf16, or let flowrate search with --batch-size auto"
        ) from None


def _count_blocks(problem: Problem, model: torch.nn.Module) -> int | None:
    try:
        return len(problem.blocks(model))
    except FlowrateError:
        return None
