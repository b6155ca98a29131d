"""`flowrate compare A B`: is B faster than A, or within noise? For people and for CI.

The comparison lives in flowrate.results.compare and its text in flowrate.cli.compare_text; this
module chooses the runs, refuses runs of different problems unless forced, prints (a table,
Markdown or JSON) and turns a significant slowdown into an exit code with --fail-if-slower.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from flowrate.cli.options import FiniteRange, store_option

if TYPE_CHECKING:
    from flowrate.results.compare import Comparison

# as in flowrate.results.compare, which is not imported here: it loads numpy and scipy, and
# `flowrate --help` imports every command's module
TESTS = ("welch", "mannwhitney")
DEFAULT_ALPHA = 0.05
DEFAULT_MIN_EFFECT_PCT = 1.0
FORMATS = ("table", "md", "json")


@click.command("compare")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.option(
    "--test",
    type=click.Choice(TESTS),
    default="welch",
    show_default=True,
    help="The significance test over the raw samples: Welch's t-test (means, unequal variances) or "
    "the Mann–Whitney U test (ranks; robust to outliers). Either way the interval shown is Welch's "
    "interval of the difference of the means.",
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
@click.option("--force", is_flag=True, help="Compare runs of different problems anyway.")
@store_option
def command(
    a: str,
    b: str,
    test: str,
    alpha: float,
    min_effect_pct: float,
    fail_pct: float | None,
    output_format: str,
    force: bool,
    store: str | None,
) -> None:
    """Compare B against the baseline A, metric by metric, and say whether the difference is real.

    A and B are each a run id (or a unique prefix), a tag (every run with it, their intervals
    pooled) or a result file (--out, --json, an export). For every metric either side recorded:
    the means (and medians) of A and B, the ratio B/A, the difference B − A with its confidence
    interval, the p-value of the test over the raw samples (each compute interval; for figures
    measured once per run, each run) and a verdict: faster/slower (better/worse) only when
    p < alpha and the difference is at least --min-effect; otherwise not significant, saying
    whether it is within noise or below the minimum effect. With one run per side a per-run
    figure gets a ratio but no test.

    Differences in the environment (device, CPU, PyTorch, CUDA, flowrate, threads) are warned
    about. Runs of different problems (problem, size, mode or shape) are refused unless --force.

    Exit codes: 0 compared; 1 B is significantly slower than --fail-if-slower allows, or a run
    could not be read; 2 bad input, including runs of different problems without --force.
    """
    from flowrate.cli import compare_text, console
    from flowrate.cli.select import select_runs
    from flowrate.results.compare import compare
    from flowrate.results.store import RunFilter

    side_a = [run.result for run in select_runs(store, [a], RunFilter())]
    side_b = [run.result for run in select_runs(store, [b], RunFilter())]
    comparison = compare(
        side_a, side_b, test=test, alpha=alpha, min_effect=min_effect_pct / 100, labels=(a, b)
    )
    if comparison.problem_mismatch and not force:
        raise click.UsageError(compare_text.mismatch_message(comparison), ctx=click.get_current_context())
    for line in comparison.warnings:
        console.warn(line)
    if output_format == "json":
        console.data(json.dumps(comparison.to_dict(), indent=2))
    elif output_format == "md":
        console.data(compare_text.to_markdown(comparison))
    else:
        table = compare_text.header(comparison), compare_text.rows(comparison)
        console.grid(compare_text.title(comparison), *table, right_aligned=compare_text.RIGHT_ALIGNED)
        if configuration := compare_text.configuration_line(comparison):
            console.status(configuration)
        console.status(compare_text.legend(comparison))
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
