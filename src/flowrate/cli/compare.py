"""`flowrate compare A B`: is B faster than A, or within noise? For people and for CI.

Recorded runs are compared by flowrate.analysis.compare_recorded (with the store's noise for
their configuration where a side has too few runs; two surveys figure by figure), sides measured
now by flowrate.cli.compare_live and flowrate.cli.compare_budget; the text is
flowrate.cli.compare_text's. This module parses the flags, chooses the runs, makes one of those
calls, refuses runs of different problems unless forced, prints (a table, Markdown or JSON) and
turns a significant slowdown into an exit code with --fail-if-slower.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from flowrate.cli.compare_live import live_options
from flowrate.cli.options import store_option
from flowrate.cli.param_types import FiniteRange

if TYPE_CHECKING:
    from flowrate.analysis.compare_recorded import Judging
    from flowrate.results.compare import Comparison

# as in flowrate.results.compare, which is not imported here: it loads numpy and scipy, and
# `flowrate --help` imports every command's module
TESTS = ("welch", "mannwhitney")
DEFAULT_ALPHA = 0.05
DEFAULT_MIN_EFFECT_PCT = 1.0
FORMATS = ("table", "md", "json")
MIN_OWN_RUNS = 3  # as flowrate.results.verdict.MIN_OWN_RUNS: below it, the store's noise is looked up


@click.command("compare")
@click.argument("a", metavar="A", required=False)
@click.argument("b", metavar="B", required=False)
@click.option(
    "--test",
    type=click.Choice(TESTS),
    default="welch",
    show_default=True,
    help="The test over one value per run (process): a t-test of the log ratio of the means "
    "(Welch's degrees of freedom) or the Mann–Whitney U test (ranks; needs 4 runs a side or more "
    "to reach p < 0.05). Either way the interval shown is the t interval of the ratio B/A.",
)
@click.option(
    "--alpha",
    type=FiniteRange(0, 1, min_open=True, max_open=True),
    default=DEFAULT_ALPHA,
    show_default=True,
    help="Significance level; the confidence interval is the 1 − alpha one.",
)
@click.option(
    "--min-effect",
    "min_effect_pct",
    type=FiniteRange(min=0),
    default=DEFAULT_MIN_EFFECT_PCT,
    show_default=True,
    metavar="PCT",
    help="The smallest relative difference, in percent, that is called faster or slower; a "
    "significant difference under it is reported as not significant (below the minimum effect).",
)
@click.option(
    "--fail-if-slower",
    "fail_pct",
    type=FiniteRange(min=0),
    metavar="PCT",
    help="For CI: exit 1 when B's samples/s is significantly slower than A's (the verdict is "
    "'slower') by more than PCT percent. A drop that is not significant exits 0.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(FORMATS),
    default="table",
    show_default=True,
    help="table: a table on the terminal; md: Markdown (a pipe table and the warnings); json: the "
    "whole comparison as JSON.",
)
@click.option(
    "--force", is_flag=True, help="Compare runs of different problems, or on different machines, anyway."
)
@click.option(
    "--history/--no-history",
    default=True,
    show_default=True,
    help=f"Use the between-run noise the store has recorded for this configuration on this machine "
    f"(`flowrate noise` shows it): with fewer than {MIN_OWN_RUNS} runs on a side it stands in for "
    "their spread; with more it is pooled with their spread when they are no noisier.",
)
@store_option
@live_options
def command(
    a: str | None,
    b: str | None,
    test: str,
    alpha: float,
    min_effect_pct: float,
    fail_pct: float | None,
    output_format: str,
    force: bool,
    history: bool,
    store: str | None,
    run_specs: tuple[str, str] | None,
    runs: int | None,
    until_ci_pct: float | None,
    max_runs: int | None,
    revs: tuple[str, ...],
    budget: str | None,
) -> None:
    """Compare B against the baseline A, metric by metric, and say whether the difference is real.

    A and B are each a run id (or a unique prefix), a tag (every run with it) or a result file
    (--out, --json, an export). The process is the unit: each run is one value per metric (its
    median interval value, or its own figure; each repeat of a --repeat run is one), and the
    spread between runs is the noise — intervals of one process share its offset and are not
    independent. For every metric either side recorded: the means (and medians) over the runs,
    the runs per side, the ratio B/A with its confidence interval, the p-value and a verdict:
    faster/slower (better/worse) only when p < alpha and the difference is at least
    --min-effect. With one run a side there is no verdict, unless the store knows this
    configuration's noise on this machine (then it is used, and said). Each verdict names its
    evidence ("3 runs a side, between-run CV 1.9%").

    Differences in the environment (device, CPU, PyTorch, CUDA, flowrate, threads) are warned
    about. Runs of different problems (problem, size, mode or shape) or on different machines
    (device, CPU model) are refused unless --force.

    With --run A_SPEC B_SPEC the sides are measured now, interleaved, each run a fresh process
    recorded in the store (flowrate.cli.compare_live); with --rev REV_A --rev REV_B too, each
    side runs at its own git revision. With --budget DURATION the whole command takes at most that
    long: flowrate chooses the runs a side and their length from the noise and says why, and
    pairs the A B B A blocks where the machine drifted, or, on the CPU, runs each block as two
    pairs of processes that take turns and pairs them (flowrate.cli.compare_budget).

    Two surveys (`flowrate survey`) are compared figure by figure: each figure of both, B/A, and
    whether the two agree within their own spread. A survey is never compared with a run.

    Exit codes: 0 compared; 1 B is significantly slower than --fail-if-slower allows, or a run
    could not be read (or, with --run, failed); 2 bad input, including runs of different problems
    or machines without --force; 130 interrupted (with --run: the verdict so far is shown first).
    """
    from flowrate.analysis.compare_recorded import Judging
    from flowrate.cli.compare_live import LiveFlags, compare_live

    if a is not None and run_specs is not None:
        raise click.UsageError("with --run the sides are its two specs: give no A or B")
    judging = Judging(test, alpha, min_effect_pct / 100, history)
    shown = Shown(output_format, force, fail_pct)
    live = LiveFlags(run_specs, revs, runs, until_ci_pct, max_runs, budget)
    if live.budget is not None:
        from flowrate.cli.compare_budget import compare_within

        compare_within(live, judging, force, store, shown.show, fail_pct)
        return
    if live.asked:  # measure the sides now
        compare_live(live, judging, force, store, shown.show)
        return
    if a is None or b is None:
        raise click.UsageError("give A and B (recorded runs), or --run A_SPEC B_SPEC to measure both now")
    _compare_recorded((a, b), store, judging, shown)


def _compare_recorded(refs: tuple[str, str], store: str | None, judging: Judging, shown: Shown) -> None:
    """Compare the recorded runs (or surveys) the references name, and show the comparison."""
    from flowrate.analysis.compare_recorded import SurveyComparison, compare_recorded, is_survey
    from flowrate.cli.compare_survey import show_surveys
    from flowrate.cli.select import select_runs
    from flowrate.results.store_filter import RunFilter

    side_a, side_b = (select_runs(store, [ref], RunFilter()) for ref in refs)
    if shown.fail_pct is not None and any(is_survey(run.result) for run in side_a + side_b):
        raise click.UsageError("--fail-if-slower applies to runs; surveys are compared figure by figure")
    compared = compare_recorded(store, side_a, side_b, refs, judging)
    if isinstance(compared, SurveyComparison):
        show_surveys(compared, shown.output_format)
    else:
        shown.show(compared, True, None)


@dataclass(frozen=True)
class Shown:
    """How a comparison is shown: the format, whether a mismatch is forced through, the gate."""

    output_format: str
    force: bool
    fail_pct: float | None  # --fail-if-slower

    def show(self, comparison: Comparison, gate: bool, budget: dict[str, Any] | None) -> None:
        """Print ``comparison`` (with ``gate``, apply --fail-if-slower; with ``budget``, say how a
        --budget was spent)."""
        _show(comparison, self.output_format, self.force, self.fail_pct if gate else None, budget)


def _show(
    comparison: Comparison,
    output_format: str,
    force: bool,
    fail_pct: float | None,
    budget: dict[str, Any] | None = None,
) -> None:
    """Print the comparison as asked (with ``budget``, how a --budget was spent: in the JSON as
    "budget", on stderr otherwise); refuse a problem or machine mismatch unless forced; apply
    the gate."""
    from flowrate.cli import compare_text, console

    if (comparison.problem_mismatch or comparison.machine_mismatch) and not force:
        raise click.UsageError(compare_text.mismatch_message(comparison), ctx=click.get_current_context())
    for line in comparison.warnings:
        console.warn(line)
    if output_format == "json":
        console.data(json.dumps({**comparison.to_dict(), **({"budget": budget} if budget else {})}, indent=2))
    elif output_format == "md":
        console.data(compare_text.to_markdown(comparison))
    else:
        table = compare_text.header(comparison), compare_text.rows(comparison)
        console.grid(compare_text.title(comparison), *table, right_aligned=compare_text.RIGHT_ALIGNED)
        if configuration := compare_text.configuration_line(comparison):
            console.status(configuration)
        console.status(compare_text.legend(comparison))
        for line in compare_text.evidence(comparison):
            console.status(line)
        if budget:
            console.status(compare_text.budget_line(budget))
    if fail_pct is not None:
        _fail_if_slower(comparison, fail_pct)


def _fail_if_slower(comparison: Comparison, fail_pct: float) -> None:
    """Exit 1 (RunFailed) when B is significantly slower than A by more than fail_pct %."""
    from flowrate.cli import compare_text, console
    from flowrate.errors import RunFailed
    from flowrate.results.compare import significantly_slower

    slower = significantly_slower(comparison, fail_pct / 100)
    if slower is None:
        console.warn(compare_text.untested_gate(comparison))
    elif slower:
        raise RunFailed(compare_text.slower_message(comparison, fail_pct))
