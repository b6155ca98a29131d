"""How an interleaved comparison's runs were measured, kept on the runs as a tag.

A comparison within a budget (flowrate.campaigns.compare.live) measures its sides in A B B A
blocks, or in pairs of processes that take turns, and its verdict pairs the runs by block
(flowrate.results.blocks) or by pair (flowrate.results.turns). Each run it compares is tagged
NAME:blocks or NAME:turns (design_tag) beside NAME:A or NAME:B, so that `flowrate compare
NAME:A NAME:B` over the recorded runs pairs them the same way: where every run on both sides
carries one comparison's design tag (recorded_design), each side is put back in the order it ran
(in_run_order) and judged as it was. Runs without such a tag
(a comparison of a fixed number of runs, runs picked by hand, or sides from two comparisons) are
judged unpaired, as any recorded runs are.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Protocol

from flowrate.results.schema import Result


class RunDesign(enum.Enum):
    """How a comparison's runs were paired as they ran."""

    BLOCKS = "blocks"  # one at a time in A B B A blocks: block k holds runs 2k and 2k + 1 a side
    TURNS = "turns"  # in pairs of processes that took turns: run i of each side ran together


def design_tag(name: str, design: RunDesign) -> str:
    """The tag that says a run of comparison ``name`` (compare:ID) was measured in ``design``."""
    return f"{name}:{design.value}"


class TaggedRun(Protocol):
    """A recorded run with its tags (flowrate.results.store.StoredRun is one)."""

    @property
    def result(self) -> Result: ...

    @property
    def tags(self) -> Sequence[str]: ...


def recorded_design(side_a: Sequence[TaggedRun], side_b: Sequence[TaggedRun]) -> RunDesign | None:
    """The design every run of both sides carries the same comparison's tag for; None where no
    one design tag is on them all."""
    runs = [*side_a, *side_b]
    if not side_a or not side_b:
        return None
    shared = set(runs[0].tags).intersection(*(run.tags for run in runs[1:]))
    found = {
        design
        for tag in shared
        for design in RunDesign
        if tag.startswith("compare:") and tag.endswith(f":{design.value}")
    }
    return found.pop() if len(found) == 1 else None


def in_run_order(side: Sequence[TaggedRun]) -> list[Result]:
    """A side's results in the order they ran, from runs listed newest first as the store lists
    them (by created_at, which counts whole seconds, then by when each was recorded): by
    created_at, and where two share a second, the one listed later first."""
    newest_first = sorted(side, key=lambda run: run.result.created_at, reverse=True)  # stable
    return [run.result for run in reversed(newest_first)]
