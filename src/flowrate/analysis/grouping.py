"""Runs split by problem: figures of different problems are never compared.

Samples/s of an MNIST MLP and of ResNet-50 differ a thousandfold for reasons that are not a
trade-off, so a plot gives each problem (family and size, as the store lists them) axes of its
own, and a Pareto ranking compares a run only with runs of its own problem.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from flowrate.results.schema import Result
from flowrate.results.store import StoredRun

Run = TypeVar("Run", bound=StoredRun | Result)


def problem_of(run: StoredRun | Result) -> str:
    """'family/size' (or the name alone), read as the store reads it."""
    if isinstance(run, StoredRun):
        name, size = run.problem, run.size
    else:
        name = run.problem.get("name") or run.config.get("problem") or "?"
        size = run.problem.get("size")
    return f"{name}/{size}" if size else str(name)


def by_problem(runs: Sequence[Run]) -> list[tuple[str, list[Run]]]:
    """The runs of each problem, problems in name order, runs in the order given."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(problem_of(run), []).append(run)
    return sorted(groups.items(), key=lambda item: item[0])
