"""Where this process stands in a launch: torchrun's environment read once (rank, world size,
local rank), which process prints and records, and which device each rank uses."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from flowrate.config import AUTO
from flowrate.errors import ConfigError, FlowrateError
from flowrate.measure.device import resolve_device

LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class Launch:
    """This process's place in a launch, from torchrun's environment."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int | None = None  # ranks on this node (torchrun's LOCAL_WORLD_SIZE)


def launched(environ: dict[str, str] | None = None) -> Launch | None:
    """torchrun's launch, or None when this process was started alone."""
    env = os.environ if environ is None else environ
    if any(name not in env for name in LAUNCH_VARIABLES):
        return None
    try:
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
        local = int(env.get("LOCAL_RANK", "0"))
        local_world = int(env["LOCAL_WORLD_SIZE"]) if "LOCAL_WORLD_SIZE" in env else None
    except ValueError:
        raise FlowrateError("RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE must be integers") from None
    if not 0 <= rank < world:
        raise FlowrateError(f"RANK {rank} is outside WORLD_SIZE {world}: launch with torchrun")
    return Launch(rank, world, local, local_world)


def is_primary() -> bool:
    """Whether this process prints, writes and records: rank 0, or a process started alone."""
    launch = launched()
    return launch is None or launch.rank == 0


def check_device_for_launch(name: str, launch: Launch, visible_gpus: int) -> None:
    """An explicit ``cuda:K`` under torchrun would put every rank of a node on GPU K: refused
    (not read as K + LOCAL_RANK, a meaning it has nowhere else), by every rank alike, before any
    group is joined. Allowed where it cannot collide: one visible GPU per rank (CUDA_VISIBLE_DEVICES
    set per rank: cuda:0 is each rank's own) or one rank per node."""
    if name.startswith("cuda:") and visible_gpus > 1 and launch.local_world_size != 1:
        why = f"{name} would put every rank of this node on one GPU"
        raise ConfigError("device", f"{why}: pass --device cuda, and rank r of a node uses cuda:LOCAL_RANK")


def rank_device(name: str, local_rank: int) -> torch.device:
    """This rank's device: 'auto' and 'cuda' mean cuda:LOCAL_RANK where CUDA is present, or cuda:0
    where the rank sees one GPU only (CUDA_VISIBLE_DEVICES set per rank: that one is its own)."""
    if name in (AUTO, "cuda") and torch.cuda.is_available():
        count = torch.cuda.device_count()
        if count == 1:
            local_rank = 0
        elif local_rank >= count:
            raise ConfigError(
                "device", f"LOCAL_RANK {local_rank} needs a CUDA device but only {count} are visible"
            )
        device = torch.device("cuda", local_rank)
    else:
        device = resolve_device(name)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return device
