"""Runs split by problem: figures of different problems, or of different kinds of record, are never
compared.

Samples/s of an MNIST MLP and of ResNet-50 differ a thousandfold for reasons that are not a
trade-off, so a plot gives each problem (family and size, as the store lists them) axes of its
own, and a Pareto ranking compares a run only with runs of its own problem.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from flowrate.results.identity import family
from flowrate.results.schema import Result
from flowrate.results.store import StoredRun

Run = TypeVar("Run", bound=StoredRun | Result)

# the modes of records that are not runs of a problem (flowrate.results.identity.Kind)
OTHER_KINDS = frozenset({"generate", "serve"})


def problem_of(run: StoredRun | Result) -> str:
    """'family/size' (or the name alone), read as the store reads it; a generation's and a serving
    run's qualified by their kind and server (flowrate.results.identity.family), so they never
    share a group with training or inference runs."""
    if isinstance(run, StoredRun):
        if run.mode not in OTHER_KINDS:  # the store's columns suffice: no record to parse
            return f"{run.problem}/{run.size}" if run.size else run.problem
        return family(run.result)
    return family(run)


def by_problem(runs: Sequence[Run]) -> list[tuple[str, list[Run]]]:
    """The runs of each problem, problems in name order, runs in the order given."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(problem_of(run), []).append(run)
    return sorted(groups.items(), key=lambda item: item[0])
