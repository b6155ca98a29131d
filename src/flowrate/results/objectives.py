"""What a ranking optimizes: an objective is a metric of the metrics table and a direction.

One parser for every command that takes objectives (`pareto --objective`, the oracle view,
`explore --objective` and its space file, `plot pareto`): ``samples_per_sec``,
``samples_per_sec:max``, ``peak_memory:min``, ``final_loss:auto``. A metric is named by its full
name or by a leading part only one metric has (``peak_memory`` is ``peak_memory_bytes``); the
direction is max, min, or auto (or nothing): the metric's own better way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from flowrate.errors import ConfigError
from flowrate.results.metrics import NAMED_METRICS, Metric


def find_metric(name: str, field: str, table: Mapping[str, Metric] = NAMED_METRICS) -> Metric:
    """The metric of ``table`` (every named metric: a run's, a generation's, a serving run's)
    ``name`` means: its full name, or a leading part only one metric has; else a ConfigError
    naming ``field`` and the known metrics."""
    key = name.strip().lower().replace("-", "_")
    matches = [m for m in table if m == key] or [m for m in table if m.startswith(key)]
    if not key or len(matches) != 1:
        raise ConfigError(field, f"unknown metric {name.strip()!r}; known metrics: {', '.join(table)}")
    return table[matches[0]]


@dataclass(frozen=True)
class Objective:
    metric: Metric
    maximize: bool

    @property
    def name(self) -> str:
        return self.metric.name

    @property
    def spec(self) -> str:
        """As it is typed and stored: 'samples_per_sec:max'."""
        return f"{self.metric.name}:{'max' if self.maximize else 'min'}"

    def __str__(self) -> str:
        """As a table heads it: 'max samples/s'."""
        return f"{'max' if self.maximize else 'min'} {self.metric.label}"


def parse_objective(
    text: str, field: str = "objective", table: Mapping[str, Metric] = NAMED_METRICS
) -> Objective:
    """``METRIC`` or ``METRIC:max|min|auto`` (module docstring), a metric of ``table``; a mistake
    names ``field``."""
    name, _, direction = text.partition(":")
    metric = find_metric(name, field, table)
    direction = direction.strip().lower()
    if direction in ("", "auto"):
        return Objective(metric, metric.higher_is_better)
    if direction not in ("max", "min"):
        raise ConfigError(field, f"{text!r}: the direction after ':' must be max, min or auto")
    return Objective(metric, direction == "max")


def parse_objectives(
    texts: Sequence[str], field: str = "objective", table: Mapping[str, Metric] = NAMED_METRICS
) -> tuple[Objective, ...]:
    """At least one objective of ``table``, none named twice."""
    objectives = tuple(parse_objective(t, field, table) for t in texts)
    if not objectives:
        raise ConfigError(field, "give at least one, e.g. --objective samples_per_sec:max")
    names = [o.name for o in objectives]
    if len(set(names)) != len(names):
        raise ConfigError(field, f"a metric is named twice: {', '.join(names)}")
    return objectives
