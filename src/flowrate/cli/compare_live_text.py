"""What `flowrate compare --run` prints around its runs (flowrate.campaigns.compare.live): what each
side runs and how the runs stop, a budget's first block, each run as it is recorded, and how the
comparison ended. Pure: data in, lines out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowrate.units import rate

if TYPE_CHECKING:
    from flowrate.campaigns.compare.interleave import StoppingRule
    from flowrate.campaigns.compare.live import LiveComparison, LiveRun, Side


def opening_lines(sides: list[Side], rule: StoppingRule | None) -> list[str]:
    """What each side runs (at its revision, if it has one) and how the runs stop."""
    lines = []
    for side in sides:
        at = f" at {side.revision.name} ({side.revision.short})" if side.revision else ""
        lines.append(f"{side.label}: flowrate run {side.spec}{at}")
    return lines if rule is None else [*lines, f"stopping: {rule.method}"]


def first_block_line(budget_s: float, first_s: float) -> str:
    """What a budget's first block measures, and how long each of its runs is."""
    return (
        f"budget {budget_s:g} s: a first A B B A block of {first_s:g} s runs measures the start-up and noise"
    )


def run_line(run: LiveRun) -> str:
    """One run as it is recorded."""
    return f"run {run.number} ({run.label}): median {rate(run.samples_per_sec)} samples/s, run {run.run_id}"


def closing_line(live: LiveComparison) -> str:
    """How the comparison ended, and how to see it again."""
    labels = live.labels
    a, b = (len(live.done.values[side]) for side in "AB")
    if live.interrupted:
        how = f"interrupted after {live.recorded} runs ({a} of A, {b} of B); they stay recorded"
    elif live.budget is not None:
        spent = live.budget
        runs = f"{a} run{'s' if a != 1 else ''} a side"
        tag = f"tagged {labels[0][:-2]}:pilot"
        if spent.plan is not None and spent.plan.turns:
            first = f"the first block's {len(spent.pilot) // 2} ({tag})"
            shape = f"in {a} pair{'s' if a != 1 else ''} that took turns, {first} among them"
        else:
            shape = f"in {a // 2} A B B A blocks after a first block of {len(spent.pilot)} ({tag})"
        how = f"{spent.stopped}: {runs} {shape}, {spent.elapsed_s:.0f} s of the {spent.budget_s:g} s budget"
    else:
        how = f"{live.done.stopped}: {a} run{'s' if a != 1 else ''} a side"
    return (
        f"{how}, tagged {labels[0]} and {labels[1]} in {live.store}: "
        f"`flowrate compare {labels[0]} {labels[1]}` shows them again"
    )
