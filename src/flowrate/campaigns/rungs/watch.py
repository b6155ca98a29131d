"""A configuration's rungs measured in one process: an exploration's promotions decided inside the run.

A rung run as a process of its own pays the start-up (interpreter, imports, model build) and
the preheat again (flowrate.campaigns.rungs.ladder). Given a Continuation, the configuration
runs once, at full length, and at each rung below the full duration (the first sample point
past the rung's duration and its minimum timed steps) the run assembles its Result so far and
stops there if a rival measured at that rung beats it beyond noise. Each rung reached gives a
Result of its own: the run's figures over its timed steps up to that point, its config's
duration and minimum steps the rung's. Two differences from a run of its own at that length:
the preheat is the full run's, and the energy meter reads once, over the whole run (a rung's
Result has no energy; explore keeps runs of their own for energy and power objectives).

The decision is taken at a sample point, so the time it takes (assembling a Result: a few
milliseconds against a sample interval of 0.2 s) falls in the next interval's.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from flowrate.campaigns.rungs.ladder import Continuation
from flowrate.config import RunConfig
from flowrate.measure.loop import COMPUTE, LoopRecord
from flowrate.results.metrics import METRICS
from flowrate.results.schema import Result


def figures(result: Result, names: Sequence[str]) -> tuple[dict[str, float], dict[str, float]]:
    """A run's figures for ``names`` and their standard errors (from the per-interval values,
    where the metric has them); a figure the run did not record is left out."""
    values, noise = {}, {}
    for name in names:
        metric = METRICS[name]
        value = metric.value(result)
        if value is None:
            continue
        values[name] = float(value)
        samples = metric.interval_values(result)
        if len(samples) >= 2:
            noise[name] = statistics.stdev(samples) / len(samples) ** 0.5
    return values, noise


def plan_for(continuation: Continuation, min_steps: Sequence[int]) -> dict[str, Any]:
    """The plan a run is handed (JSON-able): the continuation and each rung's minimum timed steps."""
    return {"continuation": continuation.to_dict(), "min_steps": list(min_steps)}


class RungWatch:
    """A run's observer (flowrate.harness.run.RunObserver): measures it at each rung and stops it
    where it is beaten there; ``reached`` holds the Result at each rung it measured."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.continuation = Continuation.from_dict(plan["continuation"])
        self.min_steps = [int(n) for n in plan["min_steps"]]
        self.reached: list[Result] = []
        self.stopped = False

    def at_sample_point(self, record: LoopRecord, so_far: Callable[[], Result]) -> bool:
        """Measure the run at every rung it has passed since the last sample point (the run's
        end may pass one too); stop it at the first where it is beaten."""
        elapsed = record.intervals[-1].reading.elapsed_s
        steps = None  # counted only once a rung's duration has passed: this runs in the timed loop
        names = [name for name, _ in self.continuation.objectives]
        while not self.stopped and (step := len(self.reached)) < len(self.continuation.rivals):
            if elapsed < self.continuation.durations[step]:
                break
            if steps is None:
                steps = sum(i.steps for i in record.intervals if i.kind == COMPUTE)
            if steps < self.min_steps[step]:
                break
            duration = self.continuation.durations[step]
            result = _at(so_far(), duration, self.min_steps[step])
            self.reached.append(result)
            self.stopped = not self.continuation.goes_on(step, *figures(result, names))
        return self.stopped

    def results(self, final: Result) -> list[Result]:
        """The Result at each rung the run reached, lowest first: the run's own at the last
        (stopped at a lower rung, its config says that rung's duration)."""
        if not self.stopped:
            return [*self.reached, final]
        last = len(self.reached) - 1
        return [*self.reached[:-1], _at(final, self.continuation.durations[last], self.min_steps[last])]


def _at(result: Result, duration_s: float, min_steps: int) -> Result:
    """``result`` as the measurement of a rung ``duration_s`` long with ``min_steps`` timed steps."""
    config = result.config
    if not isinstance(config, RunConfig):
        raise TypeError(f"a rung measures a run, not a {result.kind} record")
    return dataclasses.replace(result, config=config.replace(duration_s=duration_s, min_steps=min_steps))
