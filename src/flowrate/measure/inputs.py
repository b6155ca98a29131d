"""The input pipeline's share of the step time: how input-bound a run is, and what to do about it.

The advice counts cores. Loader workers are processes that need cores of their own, and the step
computes on some too: torch's threads on a CPU device, the one process that launches kernels on
an accelerator. More workers help only while cores are free; past that they take cores from the
step (workers beside as many compute threads as there are cores can run a step slower than no
workers at all), so the advice is fewer workers or fewer --threads, never more workers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol

import torch

INPUT_BOUND_WARN = 0.05
INPUT_BOUND_HIGH = 0.20


class TimedInterval(Protocol):
    """An interval as the input report reads it (an IntervalRecord)."""

    @property
    def seconds(self) -> float: ...

    @property
    def input_wait_s(self) -> float | None: ...


def usable_cores() -> int:
    """The cores this process may run on (its affinity: a container's share, not the machine's)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity on macOS and Windows
        return os.cpu_count() or 1


def compute_threads(device: torch.device) -> int:
    """The host threads a step computes with: torch's on a CPU device, else the launching process."""
    return torch.get_num_threads() if device.type == "cpu" else 1


def input_report(
    description: dict[str, Any],
    workers: int,
    directory: str,
    intervals: Sequence[TimedInterval],
    device: torch.device,
    cores: int | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The result's input section and its warnings, from the per-interval waits.

    ``description`` is the feed's own account (dataset, loader settings); ``workers`` and
    ``directory`` are its loader's, ``device`` the run's (whose step competes with the workers for
    the host's ``cores``, by default this process's), for the advice. Call it while the run's
    thread count is still set.
    """
    timed = [i for i in intervals if i.input_wait_s is not None]
    wait = sum(i.input_wait_s or 0.0 for i in timed)
    seconds = sum(i.seconds for i in timed)
    share = wait / seconds if seconds > 0 else 0.0
    section = {
        **description,
        "input_wait_s": wait,
        "input_bound_share": share,
        "input_bound": input_bound_level(share),
    }
    cores = usable_cores() if cores is None else cores
    warning = input_warning(share, workers, directory, compute_threads(device), cores)
    warnings = [warning] if warning else []
    if workers > cores:
        warnings.append(
            f"--loader-workers {workers} is more than this machine's {cores} cores: the workers compete "
            "with each other and with the step for them"
        )
    return section, warnings


def input_bound_level(share: float) -> str:
    """ "no", "moderately" (≥ 5%) or "highly" (≥ 20%) input-bound, as TensorFlow's profiler says."""
    if share >= INPUT_BOUND_HIGH:
        return "highly"
    return "moderately" if share >= INPUT_BOUND_WARN else "no"


def input_warning(share: float, workers: int, directory: str, threads: int, cores: int) -> str | None:
    """The warning of an input-bound run, with what to change given ``workers`` loader workers
    and ``threads`` compute threads on ``cores`` cores; None when it is not input-bound."""
    level = input_bound_level(share)
    if level == "no":
        return None
    threshold = INPUT_BOUND_HIGH if level == "highly" else INPUT_BOUND_WARN
    return (
        f"{level} input-bound: {share:.1%} of the step time went to waiting for batches and copying them "
        f"to the device (≥ {threshold:.0%}); {loader_advice(workers, threads, cores)}, or run "
        f"`flowrate analyze-input --data {directory}` with the same options for the smallest loader "
        "that keeps up"
    )


def loader_advice(workers: int, threads: int, cores: int) -> str:
    """What to change about the loader: more workers only onto free cores, else fewer of them (0:
    the step reads its own batches) or fewer compute threads."""
    free = cores - workers - threads
    if free > 0:
        return (
            f"raise --loader-workers (now {workers}; {free} of this machine's {cores} cores are free) "
            "or --prefetch"
        )
    held = (
        f"{_count(workers, 'loader worker')} and {_count(threads, 'compute thread')} share "
        f"{_count(cores, 'core')}"
    )
    if free == 0:
        options = []
        if threads > 1:  # a core moved from computing to loading
            options.append(f"try --loader-workers {workers + 1} --threads {threads - 1} and compare")
        if workers:
            options.append("raise --prefetch")
        return f"no core is free for another worker ({held}): {', or '.join(options) or 'use more cores'}"
    if workers == 0:  # more compute threads than cores
        return f"{held}: lower --threads to {cores}"
    fewer = max(0, cores - threads)
    where = " (the step reads its own batches)" if fewer == 0 else ""
    return (
        f"{held}: more workers would take cores from the step; try --loader-workers {fewer}{where} "
        "or fewer --threads, and compare"
    )


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"
