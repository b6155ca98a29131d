"""The input pipeline's share of the step time: how input-bound a run is, and what to do about it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol

INPUT_BOUND_WARN = 0.05
INPUT_BOUND_HIGH = 0.20


class TimedInterval(Protocol):
    """An interval as the input report reads it (an IntervalRecord)."""

    @property
    def seconds(self) -> float: ...

    @property
    def input_wait_s(self) -> float | None: ...


def input_report(
    description: dict[str, Any], workers: int, directory: str, intervals: Sequence[TimedInterval]
) -> tuple[dict[str, Any], list[str]]:
    """The result's input section and its warnings, from the per-interval waits.

    ``description`` is the feed's own account (dataset, loader settings); ``workers`` and
    ``directory`` are its loader's, for the advice.
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
    warning = input_warning(share, workers, directory)
    warnings = [warning] if warning else []
    cores = os.cpu_count() or 1
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


def input_warning(share: float, workers: int, directory: str) -> str | None:
    level = input_bound_level(share)
    if level == "no":
        return None
    threshold = INPUT_BOUND_HIGH if level == "highly" else INPUT_BOUND_WARN
    return (
        f"{level} input-bound: {share:.1%} of the step time went to waiting for batches and copying them "
        f"to the device (≥ {threshold:.0%}); raise --loader-workers (now {workers}) or --prefetch, or run "
        f"`flowrate analyze-input --data {directory}` with the same options for the smallest loader "
        "that keeps up"
    )
