"""A session's batches: read from the user's loader, divided among ranks, timed and moved to the device.

The wait for each batch is the loader's share of the loop's time (the input-bound share); the
recorder takes it at every sample point through ``LoaderWaits``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from flowrate.execution.distributed import DataParallel
from flowrate.measure.inputs import INPUT_BOUND_HIGH, INPUT_BOUND_WARN, input_bound_level
from flowrate.results.schema import IntervalRecord
from flowrate.results.sections import Input


class LoaderWaits:
    """The loader's wait for batches since the last sample point (the recorder's InputWaits)."""

    def __init__(self) -> None:
        self.wait_s = 0.0

    def start(self) -> None:
        self.wait_s = 0.0

    def take_wait(self) -> float:
        wait, self.wait_s = self.wait_s, 0.0
        return wait


def shard(batches: Iterable[Any], dp: DataParallel | None) -> tuple[Iterable[Any], str | None]:
    """The batches this rank reads, and how the loop's data is divided among ranks (None: alone).

    A DataLoader over a map-style dataset gets a DistributedSampler, so each rank reads its own
    share; anything else is left to the loop.
    """
    from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, RandomSampler

    if dp is None:
        return batches, None
    if not isinstance(batches, DataLoader):
        return batches, "the loop's own (not a DataLoader)"
    if isinstance(batches.sampler, DistributedSampler):
        return batches, "the loop's own DistributedSampler"
    if isinstance(batches.dataset, IterableDataset) or batches.batch_size is None:
        return batches, "the loop's own (an iterable dataset or a batch sampler is not re-sharded)"
    sampler: DistributedSampler[Any] = DistributedSampler(
        batches.dataset,
        num_replicas=dp.world_size,
        rank=dp.rank,
        shuffle=isinstance(batches.sampler, RandomSampler),
        drop_last=batches.drop_last,
    )
    resharded = DataLoader(
        batches.dataset,
        batch_size=batches.batch_size,
        sampler=sampler,
        num_workers=batches.num_workers,
        collate_fn=batches.collate_fn,
        pin_memory=batches.pin_memory,
        drop_last=batches.drop_last,
        timeout=batches.timeout,
        worker_init_fn=batches.worker_init_fn,
        multiprocessing_context=batches.multiprocessing_context,
        generator=batches.generator,
        prefetch_factor=batches.prefetch_factor,
        persistent_workers=batches.persistent_workers,
    )
    return resharded, "DistributedSampler (added by flowrate)"


def input_section(intervals: list[IntervalRecord], sharding: str | None) -> tuple[Input, list[str]]:
    """The Result's input section for the loop's loader, and its warning when input-bound."""
    records = [r for r in intervals if r.input_wait_s is not None]
    wait = sum(r.input_wait_s or 0.0 for r in records)
    seconds = sum(r.seconds for r in records)
    share = wait / seconds if seconds > 0 else 0.0
    level = input_bound_level(share)
    section = Input(
        dataset="the loop's loader",
        sharding=sharding,
        input_wait_s=wait,
        input_bound_share=share,
        input_bound=level,
    )
    warnings = []
    if level != "no":
        threshold = INPUT_BOUND_HIGH if level == "highly" else INPUT_BOUND_WARN
        warnings.append(
            f"{level} input-bound: {share:.1%} of the loop's time went to waiting for the loader's next "
            f"batch (≥ {threshold:.0%}); give its DataLoader more num_workers, pin_memory=True or a "
            "larger prefetch_factor"
        )
    return section, warnings


def samples_in(batch: Any) -> int | None:
    """The batch dimension of the first tensor in ``batch`` (a tensor, tuple, list or dict)."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else None
    items = batch.values() if isinstance(batch, dict) else batch if isinstance(batch, tuple | list) else ()
    for item in items:
        found = samples_in(item)
        if found is not None:
            return found
    return None


def to_device(batch: Any, device: torch.device) -> Any:
    """``batch`` with its tensors on ``device`` (in a tensor, tuple, list or dict)."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple | list):
        return type(batch)(to_device(v, device) for v in batch)
    return batch
