"""`flowrate compare --run A_SPEC B_SPEC`: measure both sides now, interleaved, then compare.

Each spec is the options of a `flowrate run` ("-p fc_mnist --duration 2"). This module parses
the specs and the stopping flags, calls flowrate.campaigns.compare.live (which runs the sides
alternately, A B B A …, each run a fresh process recorded in the store as it ends, tagged
compare:ID:A or compare:ID:B) and shows its progress and ending (flowrate.cli.compare_live_text);
the verdict is shown as `flowrate compare` shows recorded runs.

This module is imported by `flowrate --help` (through cli/compare.py): torch loads inside the
functions only.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from flowrate.cli.options import run_options
from flowrate.cli.param_types import FiniteRange

if TYPE_CHECKING:
    from flowrate.analysis.compare_recorded import Judging
    from flowrate.campaigns.compare.interleave import StoppingRule
    from flowrate.campaigns.compare.live import LiveComparison, Side
    from flowrate.results.compare import Comparison

    # prints a comparison; with the flag, applies --fail-if-slower; with a budget's report, says how
    # it was spent
    Show = Callable[[Comparison, bool, dict[str, Any] | None], None]

NEEDS_SPECS = (
    "--runs, --until-ci, --max-runs, --budget and --rev measure the sides now: give --run A_SPEC B_SPEC"
)
MAX_RUNS = 1000  # a side; each run is a fresh process and a whole benchmark
DEFAULT_RUNS = 3
DEFAULT_MAX_RUNS = 20

LIVE_OPTIONS = [
    click.option(
        "--run",
        "run_specs",
        nargs=2,
        metavar="A_SPEC B_SPEC",
        help="Measure the sides now instead of choosing recorded runs: each is the options of a "
        '`flowrate run`, quoted, e.g. --run "-p fc_mnist" "-p fc_mnist --batch-size 64". They run '
        "alternately (A B B A …), each run a fresh process recorded in the store, tagged "
        "compare:ID:A or compare:ID:B.",
    ),
    click.option(
        "--runs",
        type=click.IntRange(1, MAX_RUNS),
        help=f"With --run: runs a side (with --until-ci, the least, at least 3). [default: {DEFAULT_RUNS}]",
    ),
    click.option(
        "--until-ci",
        "until_ci_pct",
        type=FiniteRange(0, 100, min_open=True, max_open=True),
        metavar="PCT",
        help="With --run: add pairs of runs until the confidence interval of B/A is within ±PCT "
        "percent, or --max-runs a side (with --budget: A B B A blocks until then, or the budget is "
        "spent). The verdict is then tested at alpha/2, which keeps its false-positive rate at "
        "alpha however early the rule stops.",
    ),
    click.option(
        "--rev",
        "revs",
        multiple=True,
        metavar="REV",
        help="With --run, twice (--rev REV_A --rev REV_B): run each side at a git revision of the "
        "repository in this folder, from its own cached source tree ($FLOWRATE_CACHE/revs/SHA) "
        "with this environment's torch. A revision that does not build is named, with its log.",
    ),
    click.option(
        "--budget",
        metavar="DURATION",
        help="With --run: spend at most this long on the whole comparison (90s, 2m, 1h). A first "
        "A B B A block of short runs measures a run's start-up and the noise (or the store's "
        "history of the configuration gives it); the rest goes on the processes a side and the "
        "seconds each measures that make the interval of B/A narrowest, run in A B B A blocks while "
        "the next block ends within the budget. Where both sides run this checkout on the CPU, each "
        "block is two pairs of processes that take turns, interval by interval, and B/A is tested "
        "pair by pair. Each run's --duration is the plan's: give none in "
        "the specs. Where the plan's interval is wider than --until-ci (else --fail-if-slower) asks, "
        "it says what budget would do. Not with --runs.",
    ),
    click.option(
        "--max-runs",
        type=click.IntRange(3, MAX_RUNS),
        metavar="N",
        help=f"With --until-ci: the most runs a side. [default: {DEFAULT_MAX_RUNS}]",
    ),
]


def live_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """`flowrate compare`'s options for measuring the sides now."""
    for option in reversed(LIVE_OPTIONS):
        function = option(function)
    return function


@dataclass(frozen=True)
class LiveFlags:
    """`flowrate compare`'s flags for measuring the sides now, as given."""

    specs: tuple[str, str] | None  # --run A_SPEC B_SPEC
    revs: tuple[str, ...]
    runs: int | None
    until_ci_pct: float | None
    max_runs: int | None
    budget: str | None

    @property
    def asked(self) -> bool:
        """Whether any of them was given: the sides are then measured now."""
        given = (self.revs, self.runs, self.until_ci_pct, self.max_runs)
        return self.specs is not None or self.budget is not None or any(given)


def compare_live(flags: LiveFlags, judging: Judging, force: bool, store: str | None, show: Show) -> None:
    """Check the sides, measure and compare them (flowrate.campaigns.compare.live.compare_now),
    then ``show(comparison, gate, None)`` (which prints, and with ``gate`` applies
    --fail-if-slower). Ctrl-C shows the verdict so far, then exits 130 (KeyboardInterrupt).
    With --budget, flowrate.cli.compare_budget does this instead.
    """
    from flowrate.campaigns.compare.live import compare_now
    from flowrate.cli import console
    from flowrate.cli.compare_live_text import opening_lines, run_line

    if flags.specs is None:
        raise click.UsageError(NEEDS_SPECS)
    rule = _rule(flags.runs or DEFAULT_RUNS, flags.until_ci_pct, flags.max_runs, judging.alpha)
    sides = sides_of(flags.specs, flags.revs)
    check_same_problem(sides, force)
    for line in opening_lines(sides, rule):
        console.status(line)
    live = compare_now(
        rule,
        sides,
        store,
        test=judging.test,
        min_effect=judging.min_effect,
        history=judging.history,
        on_run=lambda run: console.status(run_line(run)),
    )
    finish(live, show)


def finish(live: LiveComparison, show: Show) -> None:
    """Show the comparison (gated unless interrupted; with how a budget was spent) and how it
    ended; an interrupted comparison then exits 130 (KeyboardInterrupt)."""
    from flowrate.cli import console
    from flowrate.cli.compare_live_text import closing_line

    if live.comparison is not None:
        show(live.comparison, not live.interrupted, live.budget_report)
    console.status(closing_line(live))
    if live.interrupted:
        raise KeyboardInterrupt


def _rule(runs: int, until_ci_pct: float | None, max_runs: int | None, alpha: float) -> StoppingRule:
    from flowrate.campaigns.compare.interleave import MIN_RUNS, StoppingRule
    from flowrate.errors import ConfigError

    if until_ci_pct is None:
        if max_runs is not None:
            raise ConfigError("--max-runs", "bounds --until-ci; without it --runs is the count a side")
        return StoppingRule(runs=runs, alpha=alpha)
    most = DEFAULT_MAX_RUNS if max_runs is None else max_runs
    if most < max(runs, MIN_RUNS):
        raise ConfigError("--max-runs", f"must be at least --runs ({max(runs, MIN_RUNS)}), got {most}")
    return StoppingRule(runs=runs, alpha=alpha, until_ci=until_ci_pct / 100, max_runs=most)


@click.command("run", add_help_option=False)
@run_options
def _spec_command(**flags: Any) -> None:
    """Only parses a side's spec: the run options `flowrate run` takes, nothing else."""


def sides_of(specs: tuple[str, str], revs: tuple[str, ...]) -> list[Side]:
    """The two sides: checked here, or (with --rev) each at its revision, extracted and checked."""
    from flowrate.campaigns.compare.live import Side
    from flowrate.campaigns.compare.revisions import prepare

    if not revs:
        return [_side(label, spec) for label, spec in zip("AB", specs, strict=True)]
    if len(revs) != 2:
        raise click.UsageError(f"--rev is given twice, --rev REV_A --rev REV_B; got {len(revs)}")
    return [
        Side(label, spec, _tokens(label, spec), None, prepare(rev))
        for label, spec, rev in zip("AB", specs, revs, strict=True)
    ]


def _tokens(label: str, spec: str) -> list[str]:
    try:
        return shlex.split(spec)
    except ValueError as error:  # an unclosed quote
        raise click.UsageError(f"side {label} ({spec!r}): {error}") from None


def _side(label: str, spec: str) -> Side:
    """A side's spec as a checked RunConfig; a mistake says which side and what."""
    from flowrate.campaigns.compare.live import Side
    from flowrate.cli.resolve import resolve_run
    from flowrate.errors import ConfigError

    tokens = _tokens(label, spec)
    try:
        with _spec_command.make_context("flowrate run", list(tokens)) as context:  # click empties the list
            flags = dict(context.params)
        sample_shape = flags.pop("sample_shape", None)
        config, _ = resolve_run(flags, sample_shape)
    except ConfigError as error:
        raise click.UsageError(f"side {label} ({spec!r}): {error}") from None
    except click.UsageError as error:
        raise click.UsageError(f"side {label} ({spec!r}): {error.format_message()}") from None
    return Side(label, spec, tokens, config)


def check_same_problem(sides: list[Side], force: bool) -> None:
    """Sides of different problems (problem, size, mode, shape) are refused before any run, unless
    forced (at revisions, after the runs: `flowrate compare`'s own check)."""
    if any(side.config is None for side in sides):
        return
    keys = [
        {"problem": c.problem, "size": c.size, "mode": c.mode, **c.problem_options}
        for c in (side.config for side in sides)
        if c is not None
    ]
    if keys[0] != keys[1] and not force:
        a, b = (" ".join(f"{k}={v}" for k, v in key.items() if v is not None) for key in keys)
        raise click.UsageError(
            f"the sides run different problems (A: {a}; B: {b}); a ratio between them means little: "
            "give the same problem, or --force"
        )
