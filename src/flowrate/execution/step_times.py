"""Where each streamed step's time went: weight copies in, gradient copies out, and the waits.

On the CPU a copy is a clone, timed on the host as it runs. On a CUDA device copies run on copy
streams and are timed with CUDA events. A step's events are read when the step after the next one
begins (by then they have long completed, so reading them does not stall the device) and at the
report: the events held never grow with the number of steps.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch


@dataclass
class StepTimes:
    """Where one step's time went (seconds)."""

    copy_in_s: float = 0.0
    copy_out_s: float = 0.0
    copy_wait_s: float = 0.0  # the device waited for weights that had not arrived (exposed copy)
    optimizer_wait_s: float = 0.0  # the next step waited for a block's host update


class StepTimeline:
    """The StepTimes of every step so far, and of the step under way (``current``)."""

    def __init__(self) -> None:
        self.steps: list[StepTimes] = []
        self.current = StepTimes()
        self._events: list[tuple[int, str, Any, Any]] = []  # (step, kind, begin, end) CUDA events

    def begin(self) -> None:
        self.current = StepTimes()
        self._resolve(len(self.steps) - 1)  # every step but the last one ended: their copies are done

    def end(self) -> None:
        self.steps.append(self.current)

    def events(self, kind: str) -> tuple[Any, Any]:
        """Two CUDA events to record around a copy or wait of ``kind`` (a StepTimes field less "_s")."""
        begin, end = cuda_event(), cuda_event()
        self._events.append((len(self.steps), kind, begin, end))
        return begin, end

    def medians(self, timed_steps: int | None = None) -> dict[str, float]:
        """Each StepTimes field's median over the last ``timed_steps`` steps (all: None).

        A CUDA caller synchronizes the device first: the remaining events are read here.
        """
        self._resolve(len(self.steps))
        steps = self.steps[-timed_steps:] if timed_steps else self.steps

        def median(name: str) -> float:
            values = sorted(getattr(s, name) for s in steps)
            return values[len(values) // 2] if values else 0.0

        return {f.name: median(f.name) for f in fields(StepTimes)}

    def _resolve(self, before: int) -> None:
        """Add the times of the events of steps before ``before`` to their steps, and drop them."""
        kept = []
        for index, kind, begin, end in self._events:
            if index < before:
                end.synchronize()  # complete already in practice: a step's copies end within it
                step = self.steps[index]
                setattr(step, f"{kind}_s", getattr(step, f"{kind}_s") + begin.elapsed_time(end) / 1000.0)
            else:
                kept.append((index, kind, begin, end))
        self._events = kept

    @property
    def pending_events(self) -> int:
        """Event pairs not read yet (bounded by two steps' worth)."""
        return len(self._events)


def cuda_event() -> Any:
    return torch.cuda.Event(enable_timing=True)
