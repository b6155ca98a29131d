"""`flowrate compare --run A_SPEC B_SPEC --budget DURATION`: a comparison within a time budget.

This module checks --budget against the flags it excludes, refuses specs that set a run's length
(the plan sets it), and renders flowrate.campaigns.compare.live.compare_within_budget: what each
side runs, the first block, the plan and how the budget was spent; the verdict is shown as
`flowrate compare` shows recorded runs, with the budget's report in its JSON.

Imported only when --budget is given: torch loads inside the functions.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from flowrate.process_clock import command_start

if TYPE_CHECKING:
    from flowrate.campaigns.compare.live import Side
    from flowrate.results.compare import Comparison


def compare_within(
    specs: tuple[str, str] | None,
    revs: tuple[str, ...],
    budget: str,
    *,
    runs: int | None,
    until_ci_pct: float | None,
    max_runs: int | None,
    test: str,
    alpha: float,
    min_effect: float,
    force: bool,
    store: str | None,
    show: Callable[[Comparison, bool, dict[str, Any] | None], None],
) -> None:
    """Check --budget and the sides, spend the budget on them, then ``show(comparison, gate,
    report)``; Ctrl-C shows the verdict so far, then exits 130 (KeyboardInterrupt)."""
    from flowrate.cli import compare_live

    started = command_start()  # the budget covers the interpreter's start and imports too
    if specs is None:
        raise click.UsageError(compare_live.NEEDS_SPECS)
    seconds = budget_seconds(budget, runs, max_runs, test)
    sides = compare_live.sides_of(specs, revs)
    compare_live.check_same_problem(sides, force)
    check_no_duration(sides)
    within_budget(seconds, sides, started, until_ci_pct, alpha, min_effect, store, show)


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
    started: float,
    until_ci_pct: float | None,
    alpha: float,
    min_effect: float,
    store: str | None,
    show: Callable[[Comparison, bool, dict[str, Any] | None], None],
) -> None:
    from flowrate.campaigns.compare.budgeted import budget_report, pilot_seconds
    from flowrate.campaigns.compare.live import compare_within_budget
    from flowrate.campaigns.compare.plan import BudgetTooSmall
    from flowrate.cli import compare_live, console
    from flowrate.errors import ConfigError

    for side in sides:
        console.status(compare_live.opening_lines([side], None)[0])
    first = pilot_seconds(seconds)
    console.status(
        f"budget {seconds:g} s: a first A B B A block of {first:g} s runs measures the start-up and noise"
    )
    try:
        live = compare_within_budget(
            seconds,
            sides,
            store,
            spent_before_s=time.monotonic() - started,
            alpha=alpha,
            min_effect=min_effect,
            until_ci=None if until_ci_pct is None else until_ci_pct / 100,
            on_run=lambda run: console.status(compare_live.run_line(run)),
            on_plan=lambda chosen: console.status(f"plan: {chosen.reason}"),
        )
    except BudgetTooSmall as error:
        raise ConfigError(
            "--budget",
            f"{seconds:g} s is too short here for two processes a side after the first block: "
            f"at least {math.ceil(error.minimum_s)}s",
        ) from None
    assert live.budget is not None
    if live.comparison is not None:
        show(live.comparison, not live.interrupted, budget_report(live.budget, live.comparison))
    console.status(compare_live.closing_line(live))
    if live.interrupted:
        raise KeyboardInterrupt
