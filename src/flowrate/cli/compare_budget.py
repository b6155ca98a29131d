"""`flowrate compare --run A_SPEC B_SPEC --budget DURATION`: a comparison within a time budget.

This module checks --budget against the flags it excludes, refuses specs that set a run's length
(the plan sets it), and renders flowrate.campaigns.compare.live.compare_within_budget: what each
side runs, the first block, the plan and how the budget was spent; the verdict is shown as
`flowrate compare` shows recorded runs, with the budget's report in its JSON.

Imported only when --budget is given: torch loads inside the functions.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from flowrate.analysis.compare_recorded import Judging
    from flowrate.campaigns.compare.live import Side
    from flowrate.cli.compare_live import LiveFlags, Show


def compare_within(
    flags: LiveFlags,
    judging: Judging,
    force: bool,
    store: str | None,
    show: Show,
    fail_pct: float | None = None,
) -> None:
    """Check --budget and the sides, spend the budget on them, then ``show(comparison, gate,
    report)``; Ctrl-C shows the verdict so far, then exits 130 (KeyboardInterrupt). The plan says
    what budget the width asked for would take where its own interval is wider: --until-ci's, else
    --fail-if-slower's (``fail_pct``: the gate sees a slowdown only where it exceeds the
    interval's half-width)."""
    from flowrate.cli import compare_live

    assert flags.budget is not None
    if flags.specs is None:
        raise click.UsageError(compare_live.NEEDS_SPECS)
    seconds = budget_seconds(flags.budget, flags.runs, flags.max_runs, judging.test)
    sides = compare_live.sides_of(flags.specs, flags.revs)
    compare_live.check_same_problem(sides, force)
    check_no_duration(sides)
    wanted_pct = flags.until_ci_pct if flags.until_ci_pct is not None else fail_pct
    within_budget(seconds, sides, flags.until_ci_pct, judging, store, show, wanted_pct)


def budget_seconds(budget: str, runs: int | None, max_runs: int | None, test: str) -> float:
    """--budget in seconds, checked against the flags it excludes and the least it can be."""
    from flowrate.campaigns.compare.budgeted import minimum_budget_s
    from flowrate.config.values import BadValue, to_seconds
    from flowrate.errors import ConfigError

    try:
        seconds = to_seconds(budget)
    except BadValue as error:
        raise ConfigError("--budget", f"expected {error.wanted}, got {budget!r}") from None
    if runs is not None:
        raise ConfigError("--budget", "chooses the runs a side itself: give --budget or --runs, not both")
    if max_runs is not None:
        raise ConfigError("--max-runs", "bounds --until-ci; with --budget the budget bounds the runs")
    if test != "welch":
        raise ConfigError(
            "--test", "with --budget the verdict is a t-test over runs or blocks: leave --test out"
        )
    if seconds < (least := minimum_budget_s()):
        raise ConfigError(
            "--budget",
            f"{budget} is too short for a first block and two processes a side: at least {least:.0f}s",
        )
    return seconds


def check_no_duration(sides: list[Side]) -> None:
    """With --budget the plan sets each run's length: a spec that sets one is refused."""
    for side in sides:
        given = [t for t in side.tokens if t.split("=")[0] in ("--duration", "--steps")]
        if given:
            raise click.UsageError(
                f"side {side.label} ({side.spec!r}): {given[0].split('=')[0]} is chosen by --budget: "
                "leave it out"
            )


def within_budget(
    seconds: float,
    sides: list[Side],
    until_ci_pct: float | None,
    judging: Judging,
    store: str | None,
    show: Show,
    wanted_pct: float | None = None,
) -> None:
    """Spend ``seconds`` on the sides (flowrate.campaigns.compare.live.compare_within_budget),
    saying what each side runs, the first block, each run and the plan (with what ``wanted_pct``,
    a half-width in percent, would take) as they come; then show the comparison and how the
    budget was spent."""
    from flowrate.campaigns.compare.live import compare_within_budget
    from flowrate.campaigns.compare.plan import BudgetTooSmall
    from flowrate.cli import compare_live, compare_live_text, console
    from flowrate.errors import ConfigError

    for line in compare_live_text.opening_lines(sides, None):
        console.status(line)
    try:
        live = compare_within_budget(
            seconds,
            sides,
            store,
            alpha=judging.alpha,
            min_effect=judging.min_effect,
            until_ci=None if until_ci_pct is None else until_ci_pct / 100,
            on_first_block=lambda first: console.status(compare_live_text.first_block_line(seconds, first)),
            on_run=lambda run: console.status(compare_live_text.run_line(run)),
            on_plan=lambda chosen: console.status(f"plan: {chosen.reason}"),
            wanted=None if wanted_pct is None else wanted_pct / 100,
        )
    except BudgetTooSmall as error:
        raise ConfigError(
            "--budget",
            f"{seconds:g} s is too short here for two processes a side after the first block: "
            f"at least {math.ceil(error.minimum_s)}s",
        ) from None
    compare_live.finish(live, show)
