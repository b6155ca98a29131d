"""Checkpoints: model and optimizer state written the way a training job writes them.

Saving is part of what a user's job experiences, so flowrate times it as its own interval.
Files are written to a temporary name and renamed, so an interrupted save never leaves a torn
checkpoint; loading uses ``weights_only=True`` (no pickled code runs). With --keep-checkpoints N,
each save is followed by deleting all but the newest N checkpoints in the folder (the save's time
includes it, as a training job's would).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from flowrate.errors import FlowrateError, PathError
from flowrate.execution.base import Executor

CHECKPOINT_NAME = re.compile(r"step-(\d{8,})\.pt")  # what save_checkpoint writes; nothing else is pruned


class Ranks(Protocol):
    """This rank of a data-parallel run, as far as saving a checkpoint needs it."""

    rank: int

    def barrier(self) -> None: ...


def checkpoint_saver(
    directory: str | None, executor: Executor, ranks: Ranks | None, keep: int | None = None
) -> Callable[[int], None] | None:
    """What the loop calls every --checkpoint-every steps (None without a checkpoint directory).

    In a data-parallel run rank 0 saves (the weights are the same on every rank) while the others
    wait for it, so every rank times the same interval. ``keep``: the newest checkpoints kept.
    """
    if directory is None:
        return None
    folder = Path(directory)

    def save(step: int) -> None:
        if ranks is not None and ranks.rank != 0:
            ranks.barrier()
            return
        with executor.checkpoint_state() as (model, optimizer):
            saved = save_checkpoint(folder, step, model, optimizer)
        if keep is not None:
            prune_checkpoints(folder, keep, saved)
        if ranks is not None:
            ranks.barrier()

    return save


def save_checkpoint(
    directory: Path,
    step: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None,
) -> Path:
    """Write ``step-NNNNNNNN.pt`` holding the model's and the optimizer's state dicts.

    Weight streaming has one optimizer per block: their state dicts are saved as a list.
    """
    path = directory / f"step-{step:08d}.pt"
    tmp = path.with_name(f".{path.name}.tmp")
    state: dict[str, Any] = {"step": step, "model": model.state_dict()}
    if isinstance(optimizer, torch.optim.Optimizer):
        state["optimizer"] = optimizer.state_dict()
    elif optimizer is not None:
        state["optimizer"] = [o.state_dict() for o in optimizer]
    try:
        directory.mkdir(parents=True, exist_ok=True)
        torch.save(state, tmp)
        os.replace(tmp, path)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise PathError(f"cannot write checkpoint {path}", error) from None
    return path


def prune_checkpoints(directory: Path, keep: int, saved: Path | None = None) -> list[Path]:
    """Delete all but the newest ``keep`` checkpoints in ``directory``; return the deleted.

    Newest by modification time (then step): a folder may hold an earlier run's checkpoints of
    higher steps, and those are the older ones. ``saved``, the checkpoint just written, is kept
    whatever the clocks say. Only files named as save_checkpoint names them are touched.
    """
    found = []
    for path in directory.iterdir():
        match = CHECKPOINT_NAME.fullmatch(path.name)
        if match is None or path == saved:
            continue
        try:
            found.append((path.stat().st_mtime_ns, int(match[1]), path))
        except FileNotFoundError:
            continue  # deleted meanwhile
    found.sort()
    others = keep - (saved is not None)
    old = [path for *_, path in (found[:-others] if others > 0 else found)]
    for path in old:
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as error:
            raise PathError(f"cannot delete old checkpoint {path}", error) from None
    return old


def load_checkpoint(
    path: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None = None,
) -> int:
    """Restore a checkpoint written by save_checkpoint; return its step."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError) as error:
        raise FlowrateError(f"cannot read checkpoint {path}: {error}") from None
    model.load_state_dict(state["model"])
    if isinstance(optimizer, torch.optim.Optimizer) and "optimizer" in state:
        optimizer.load_state_dict(state["optimizer"])
    elif optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer) and "optimizer" in state:
        for one, saved in zip(optimizer, state["optimizer"], strict=True):
            one.load_state_dict(saved)
    return int(state["step"])
