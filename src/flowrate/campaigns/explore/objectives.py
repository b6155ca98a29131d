"""What an exploration optimizes and what it must respect: objectives and constraints.

An objective is a metric of the metrics table and a direction, parsed as every command parses
one (flowrate.results.objectives). ``final_loss`` (fidelity: the loss a
`flowrate check` of the configuration reaches) is one too: explore then checks each configuration
(flowrate.campaigns.explore.evaluate). A constraint is a metric, a comparison and a
bound with an optional unit: ``peak_memory<16GiB``, ``samples_per_sec>=1.5k`` (byte figures take
B, KiB … TiB or kB … TB; others an SI prefix, optionally followed by the metric's unit).

A point that ran out of memory is infeasible, not an error; a point that breaks a constraint is
infeasible by how much (its violation, relative to the bound), which is what Optuna's
constrained samplers rank infeasible points by.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from flowrate.errors import ConfigError
from flowrate.results import objectives
from flowrate.results.metrics import METRICS, Metric
from flowrate.results.objectives import Objective

__all__ = ["Constraint", "Objective", "find_metric", "parse_objective", "parse_objectives"]


def find_metric(name: str, field: str) -> Metric:
    """A run's metric (explore measures runs): flowrate.results.objectives.find_metric over METRICS."""
    return objectives.find_metric(name, field, METRICS)


def parse_objective(text: str, field: str = "objective") -> Objective:
    return objectives.parse_objective(text, field, METRICS)


def parse_objectives(texts: Sequence[str], field: str = "objective") -> tuple[Objective, ...]:
    return objectives.parse_objectives(texts, field, METRICS)


_CONSTRAINT = re.compile(r"^\s*([A-Za-z_][\w-]*)\s*(<=|>=|<|>)\s*([0-9.eE+-]+)\s*([A-Za-z/%]*)\s*$")
_BYTES = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_BYTES.update({"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12})
_SCALE = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


@dataclass(frozen=True)
class Constraint:
    metric: Metric
    upper: bool  # the figure must stay below the bound (else above it)
    bound: float
    text: str

    def violation(self, value: float) -> float:
        """How far ``value`` breaks the constraint, relative to the bound; ≤ 0 when it holds."""
        excess = (value - self.bound) if self.upper else (self.bound - value)
        return excess / max(abs(self.bound), 1e-12)

    def __str__(self) -> str:
        return self.text


def parse_constraint(text: str) -> Constraint:
    """``peak_memory<16GiB``, ``samples_per_sec>=100`` or ``samples_per_sec>1.5k``."""
    match = _CONSTRAINT.match(text)
    if match is None:
        raise ConfigError(
            "constraint", f"cannot read {text!r}: write METRIC<VALUE or METRIC>VALUE (e.g. peak_memory<16GiB)"
        )
    metric = find_metric(match[1], "constraint")
    try:
        number = float(match[3])
    except ValueError:
        raise ConfigError("constraint", f"{text!r}: {match[3]!r} is not a number") from None
    bound = number * _unit_scale(metric, match[4], text)
    if not math.isfinite(bound):
        raise ConfigError("constraint", f"{text!r}: the bound must be a finite number")
    return Constraint(metric, match[2].startswith("<"), bound, f"{metric.name}{match[2]}{match[3]}{match[4]}")


def _unit_scale(metric: Metric, unit: str, text: str) -> float:
    """The factor a bound's unit gives: byte units for byte figures, else an SI prefix (k, M, G)
    optionally followed by the metric's own unit."""
    if metric.unit == "B":
        scale = _BYTES.get(unit.lower())
        if scale is None:
            raise ConfigError(
                "constraint", f"{text!r}: unknown unit {unit!r}; use B, KiB, MiB, GiB, TiB (or kB, MB, GB)"
            )
        return float(scale)
    prefix = unit[: len(unit) - len(metric.unit)] if metric.unit and unit.endswith(metric.unit) else unit
    if prefix.lower() not in _SCALE:
        raise ConfigError(
            "constraint",
            f"{text!r}: unknown unit {unit!r} for {metric.name} ({metric.unit or 'a plain number'})",
        )
    return _SCALE[prefix.lower()]


def parse_constraints(texts: Sequence[str]) -> tuple[Constraint, ...]:
    return tuple(parse_constraint(t) for t in texts)


def measured_names(objectives: Sequence[Objective], constraints: Sequence[Constraint]) -> list[str]:
    """Every metric a point's outcome must carry, objectives first."""
    return list(dict.fromkeys([o.name for o in objectives] + [c.metric.name for c in constraints]))


def violations(constraints: Sequence[Constraint], values: Mapping[str, float]) -> list[float]:
    return [c.violation(values[c.metric.name]) for c in constraints]
