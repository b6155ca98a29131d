"""`flowrate compare --run A_SPEC B_SPEC`: measure both sides now, interleaved, then compare.

Each spec is the options of a `flowrate run` ("-p fc_mnist --duration 2"). The sides run
alternately, A B B A …, each run a fresh process (flowrate.campaigns.compare.interleave), and each is
recorded in the store as it ends, tagged compare:ID:A or compare:ID:B, so an interrupted
comparison loses nothing and `flowrate compare compare:ID:A compare:ID:B` shows it again.
The verdict is the one `flowrate compare` gives over recorded runs, shown the same way.

This module is imported by `flowrate --help` (through cli/compare.py): torch loads inside the
functions only.
"""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from flowrate.cli.options import run_options
from flowrate.cli.param_types import FiniteRange

if TYPE_CHECKING:
    from flowrate.campaigns.compare.interleave import Interleaved, StoppingRule
    from flowrate.campaigns.compare.revisions import Revision
    from flowrate.config import RunConfig
    from flowrate.results.compare import Comparison
    from flowrate.results.schema import Result
    from flowrate.results.store import Store

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
        "percent, or --max-runs a side. The verdict is then tested at alpha/2, which keeps its "
        "false-positive rate at alpha however early the rule stops.",
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


def compare_live(
    specs: tuple[str, str] | None,
    revs: tuple[str, ...],
    *,
    runs: int | None,
    until_ci_pct: float | None,
    max_runs: int | None,
    test: str,
    alpha: float,
    min_effect: float,
    force: bool,
    store: str | None,
    history: bool = True,
    show: Callable[[Comparison, bool], None],
) -> None:
    """Run the sides interleaved, record each run, then compare them as `flowrate compare` does
    and ``show(comparison, gate)`` (which prints, and with ``gate`` applies --fail-if-slower).
    With ``history``, a fixed number of runs is judged with the store's between-run noise for the
    configuration too (flowrate.results.verdict pools it); a sequential rule (--until-ci) is not,
    as its error rate was set for the runs' own spread.
    Ctrl-C shows the verdict so far, then exits 130 (KeyboardInterrupt).
    """
    from flowrate.campaigns.compare.interleave import INTERRUPTED
    from flowrate.cli import console
    from flowrate.results.compare import compare
    from flowrate.results.store import Store

    if specs is None:
        raise click.UsageError(
            "--runs, --until-ci, --max-runs and --rev measure the sides now: give --run A_SPEC B_SPEC"
        )
    rule = _rule(runs or DEFAULT_RUNS, until_ci_pct, max_runs, alpha)
    sides = _sides(specs, revs)
    _check_same_problem(sides, force)
    name = f"compare:{secrets.token_hex(4)}"
    labels = (f"{name}:A", f"{name}:B")
    for side in sides:
        at = f" at {side.revision.name} ({side.revision.short})" if side.revision else ""
        console.status(f"{side.label}: flowrate run {side.spec}{at}")
    console.status(f"stopping: {rule.method}")
    results: dict[str, list[Result]] = {"A": [], "B": []}
    with Store(store) as opened:
        done = _interleave(rule, sides, opened, name, results)
        where = opened.path
    recorded = len(results["A"]) + len(results["B"])
    if results["A"] and results["B"]:
        from flowrate.results.noise import history_in_store

        known = (
            history_in_store(where, results["A"], results["B"]) if history and until_ci_pct is None else None
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
        show(comparison, done.stopped != INTERRUPTED)
    console.status(_closing_line(done, recorded, labels, where))
    if done.stopped == INTERRUPTED:
        raise KeyboardInterrupt


def _interleave(
    rule: StoppingRule, sides: list[Side], store: Store, name: str, results: dict[str, list[Result]]
) -> Interleaved:
    """The runs, each recorded as it ends; a failed run ends the comparison (what was recorded stays)."""
    from flowrate.campaigns.compare.interleave import interleave
    from flowrate.campaigns.compare.revisions import run_at
    from flowrate.campaigns.process.child import run_in_fresh_process
    from flowrate.cli import console
    from flowrate.errors import RunFailed
    from flowrate.results.metrics import METRICS
    from flowrate.results.per_process import process_values
    from flowrate.units import rate

    by_label = {side.label: side for side in sides}
    throughput = METRICS["samples_per_sec"]

    def run_one(label: str) -> float:
        side = by_label[label]
        number = len(results["A"]) + len(results["B"]) + 1
        if side.revision is not None:
            outcome = run_at(side.revision, side.tokens)
        else:
            assert side.config is not None
            outcome = run_in_fresh_process(side.config, argv=side.argv)
        if outcome.result is None:
            raise RunFailed(
                f"run {number} (side {label}: flowrate run {side.spec}) failed: {outcome.message}; "
                f"the {number - 1} runs before it are recorded, tagged {name}"
            )
        store.add(outcome.result, [name, f"{name}:{label}"])
        results[label].append(outcome.result)
        value = process_values(throughput, outcome.result)[0]
        console.status(f"run {number} ({label}): median {rate(value)} samples/s, run {outcome.result.run_id}")
        return value

    return interleave(rule, run_one)


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


def _sides(specs: tuple[str, str], revs: tuple[str, ...]) -> list[Side]:
    """The two sides: checked here, or (with --rev) each at its revision, extracted and checked."""
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
    from flowrate.cli.resolve import resolve_run
    from flowrate.errors import ConfigError

    tokens = _tokens(label, spec)
    try:
        with _spec_command.make_context("flowrate run", tokens) as context:
            flags = dict(context.params)
        sample_shape = flags.pop("sample_shape", None)
        config, _ = resolve_run(flags, sample_shape)
    except ConfigError as error:
        raise click.UsageError(f"side {label} ({spec!r}): {error}") from None
    except click.UsageError as error:
        raise click.UsageError(f"side {label} ({spec!r}): {error.format_message()}") from None
    return Side(label, spec, tokens, config)


def _check_same_problem(sides: list[Side], force: bool) -> None:
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


def _closing_line(done: Interleaved, recorded: int, labels: tuple[str, str], where: object) -> str:
    """How the comparison ended, and how to see it again."""
    from flowrate.campaigns.compare.interleave import INTERRUPTED

    a, b = (len(done.values[side]) for side in "AB")
    if done.stopped == INTERRUPTED:
        how = f"interrupted after {recorded} runs ({a} of A, {b} of B); they stay recorded"
    else:
        how = f"{done.stopped}: {a} run{'s' if a != 1 else ''} a side"
    return (
        f"{how}, tagged {labels[0]} and {labels[1]} in {where}: "
        f"`flowrate compare {labels[0]} {labels[1]}` shows them again"
    )
