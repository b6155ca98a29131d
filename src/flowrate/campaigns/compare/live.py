"""Two sides measured now, interleaved, each run recorded as it ends, then compared.

Each side is the options of a `flowrate run`, checked by this checkout (or, at a git revision,
by the revision's own code). The sides run alternately, A B B A …, each run a fresh process
(flowrate.campaigns.compare.interleave), and each is recorded in the store as it ends, tagged
compare:ID:A or compare:ID:B, so an interrupted comparison loses nothing and `flowrate compare
compare:ID:A compare:ID:B` compares it again. The comparison is the one `flowrate compare` makes
over recorded runs (flowrate.results.compare).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from flowrate.campaigns.compare.interleave import INTERRUPTED, Interleaved, StoppingRule, interleave
from flowrate.campaigns.compare.revisions import Revision, run_at
from flowrate.campaigns.process import child
from flowrate.config import RunConfig
from flowrate.errors import RunFailed
from flowrate.results.compare import Comparison, compare
from flowrate.results.metrics import METRICS
from flowrate.results.per_process import process_values
from flowrate.results.schema import Result
from flowrate.results.store import Store


@dataclass(frozen=True)
class Side:
    label: str  # "A" or "B"
    spec: str  # as the user wrote it
    tokens: list[str]  # the spec as `flowrate run` arguments
    config: RunConfig | None  # checked by this checkout; None at a revision (its own code checks it)
    revision: Revision | None = None

    @property
    def argv(self) -> list[str]:
        """The `flowrate run` command the side's runs are recorded with."""
        return ["flowrate", "run", *self.tokens]


@dataclass(frozen=True)
class LiveRun:
    """One run as it is recorded: its number in the comparison, its side, its median throughput."""

    number: int
    label: str
    samples_per_sec: float
    run_id: str


@dataclass(frozen=True)
class LiveComparison:
    """How the comparison ended: the runs' values and why they stopped, the comparison (None
    unless both sides recorded a run), and where the runs are, under which tags."""

    done: Interleaved
    comparison: Comparison | None
    recorded: int  # runs recorded, both sides
    labels: tuple[str, str]  # the tags of side A and side B
    store: Path

    @property
    def interrupted(self) -> bool:
        return self.done.stopped == INTERRUPTED


def compare_now(
    rule: StoppingRule,
    sides: list[Side],
    store: str | None,
    *,
    test: str,
    min_effect: float,
    history: bool = True,
    on_run: Callable[[LiveRun], None] = lambda run: None,
) -> LiveComparison:
    """Run the sides interleaved until ``rule`` stops, record each run (``on_run`` hears of it),
    then compare them at the rule's alpha. With ``history``, a fixed number of runs is judged with
    the store's between-run noise for the configuration too (flowrate.results.verdict pools it);
    a sequential rule (--until-ci) is not, as its error rate was set for the runs' own spread.
    A failed run raises RunFailed (what was recorded stays); an interrupt (Ctrl-C) ends the runs
    and comes back as ``interrupted``."""
    name = f"compare:{secrets.token_hex(4)}"
    labels = (f"{name}:A", f"{name}:B")
    results: dict[str, list[Result]] = {"A": [], "B": []}
    with Store(store) as opened:
        done = _interleave(rule, sides, opened, name, results, on_run)
        where = opened.path
    comparison = None
    if results["A"] and results["B"]:
        from flowrate.results.noise import history_in_store

        known = (
            history_in_store(where, results["A"], results["B"]) if history and not rule.sequential else None
        )
        comparison = compare(
            results["A"],
            results["B"],
            test=test,
            alpha=rule.verdict_alpha,
            min_effect=min_effect,
            labels=labels,
            history=known,
        )
    recorded = len(results["A"]) + len(results["B"])
    return LiveComparison(done, comparison, recorded, labels, where)


def _interleave(
    rule: StoppingRule,
    sides: list[Side],
    store: Store,
    name: str,
    results: dict[str, list[Result]],
    on_run: Callable[[LiveRun], None],
) -> Interleaved:
    """The runs, each recorded as it ends; a failed run ends the comparison (what was recorded stays)."""
    by_label = {side.label: side for side in sides}
    throughput = METRICS["samples_per_sec"]

    def run_one(label: str) -> float:
        side = by_label[label]
        number = len(results["A"]) + len(results["B"]) + 1
        if side.revision is not None:
            outcome = run_at(side.revision, side.tokens)
        else:
            assert side.config is not None
            outcome = child.run_in_fresh_process(side.config, argv=side.argv)
        if outcome.result is None:
            raise RunFailed(
                f"run {number} (side {label}: flowrate run {side.spec}) failed: {outcome.message}; "
                f"the {number - 1} runs before it are recorded, tagged {name}"
            )
        store.add(outcome.result, [name, f"{name}:{label}"])
        results[label].append(outcome.result)
        value = process_values(throughput, outcome.result)[0]
        on_run(LiveRun(number, label, value, outcome.result.run_id))
        return value

    return interleave(rule, run_one)
