"""`flowrate explore`: a multi-objective search over run options, each point a recorded run.

The search itself (Optuna's study, the rungs of run length, resume) and its session against the
store live in flowrate.campaigns.explore (engine, run), and so does reading the options and a
--space-file into what to explore, checked before the first run (options); this module parses the
flags, calls run_session, shows each evaluation as it is recorded and prints the frontier
(cli/explore_text.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from flowrate.campaigns.explore.settings import DEFAULT_BUDGET, DEFAULT_OBJECTIVES, INITIAL
from flowrate.cli.executor_options import ExecutorChoice, executor_options
from flowrate.cli.options import STORE_HELP, checked_tags, run_options
from flowrate.cli.param_types import SettingType

if TYPE_CHECKING:
    from flowrate.campaigns.explore.options import Exploration, ExploreOptions

SPACE_HELP = (
    "An option to search and its values (repeatable): A..B every integer from A to B, A..B:log2 "
    "doubling from A (1..512:log2 is 1,2,4,…,512), or a comma list (precision=fp32,bf16, compile=0,1)."
)


@click.command("explore")
@run_options
@click.option("--space", "space", multiple=True, metavar="KEY=VALUES", help=SPACE_HELP)
@click.option(
    "--space-file",
    type=click.Path(dir_okay=False),
    help='TOML file: a [space] table (key = "1..512:log2" or [values]), an optional [base] of run '
    "options and an optional [explore] table (objectives, constraints, budget, name, seed, initial), "
    "each read as its flag is. Flags override it.",
)
@click.option(
    "--objective",
    "objectives",
    multiple=True,
    metavar="METRIC[:max|:min]",
    help="What to optimize (repeatable), a metric of `flowrate pareto`'s table; final_loss "
    "(fidelity) also runs a `flowrate check` of each configuration. "
    f"[default: {' and '.join(DEFAULT_OBJECTIVES)}]",
)
@click.option(
    "--constraint",
    "constraints",
    multiple=True,
    metavar="METRIC<VALUE",
    help="A bound a point must respect (repeatable), e.g. peak_memory<16GiB, samples_per_sec>=100.",
)
@click.option(
    "--budget", help=f"Runs (12) or wall time (2h, 90m) over all sessions. [default: {DEFAULT_BUDGET}]"
)
@click.option(
    "--min-duration",
    type=SettingType("duration_s"),
    help="Multi-fidelity: the shortest rung's duration in seconds; rungs triple up to --duration (a "
    "shorter rung also runs proportionally fewer --preheat and --min-steps, at least 2), and only points "
    "that could still be on the frontier run longer. [default: every run full length]",
)
@click.option(
    "--initial",
    type=SettingType(INITIAL),
    help="Points of the initial design (spread over the space) before the model guides the search.",
)
@click.option(
    "--sampler",
    type=click.Choice(["auto", "tpe", "gp", "nsga2", "random"]),
    default="auto",
    show_default=True,
    help="Optuna's sampler; auto: gp for a budget of at most 64 runs over at most 4096 points, "
    "nsga2 for 300+ runs, else tpe.",
)
@click.option("--name", help="Name of the study (tags its runs explore:NAME). [default: explore-<id>]")
@click.option("--store", type=click.Path(dir_okay=False), help="Record the runs in this store. " + STORE_HELP)
@click.option("-t", "--tag", "tags", multiple=True, callback=checked_tags, help="Label every recorded run.")
@executor_options
@click.option("--json", "as_json", is_flag=True, help="Print the frontier as JSON on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
def command(
    space: tuple[str, ...],
    space_file: str | None,
    objectives: tuple[str, ...],
    constraints: tuple[str, ...],
    budget: str | None,
    min_duration: float | None,
    initial: int | None,
    sampler: str,
    name: str | None,
    store: str | None,
    tags: tuple[str, ...],
    executor: ExecutorChoice,
    as_json: bool,
    quiet: bool,
    sample_shape: int | None,
    **flags: Any,
) -> None:
    """Search run options for the frontier of several objectives, each point a recorded run.

    Every `flowrate run` option sets the base all points share (--seed also seeds the search);
    --space KEY=VALUES (or a --space-file) sets what is searched. Optuna proposes points a batch
    at a time; each runs in a fresh process and is recorded as a run tagged explore:NAME (and
    rung:K), so runs, compare, pareto and report work on it. A point that runs out of memory is
    infeasible, not a failure. Running the same exploration again resumes it: its study is kept
    beside the store (<store>.explore.db) and recorded points are not run again. One session of
    an exploration runs at a time: a second started while the first runs is refused (exit 2);
    start it again once the first has ended (or was killed) and it resumes.

    Exit codes: 0 a frontier was found; 1 no point ran; 2 bad input; 130 interrupted.
    """
    import sys

    from flowrate.campaigns.explore.options import ExploreOptions
    from flowrate.campaigns.explore.run import run_session
    from flowrate.cli import console, explore_text
    from flowrate.errors import RunFailed

    options = ExploreOptions(space, space_file, objectives, constraints, budget, min_duration, name, initial)
    exploration = _exploration(options, flags, sample_shape)
    spec = exploration.spec
    outcome = run_session(
        spec,
        store,
        lambda study: executor.open(store, study, sys.argv),
        budget=exploration.budget,
        seed=exploration.seed,
        initial=exploration.initial,
        sampler=sampler,
        tags=tags,
        listener=explore_text.Display(spec, exploration.budget, quiet),
    )
    if as_json:
        console.data(explore_text.to_json(spec, outcome))
    else:
        header, rows = explore_text.frontier_table(spec, outcome)
        console.grid(
            explore_text.title(spec, outcome), header, rows, right_aligned=explore_text.figure_columns(spec)
        )
    if not outcome.frontier:
        raise RunFailed(explore_text.no_frontier(outcome))


def _exploration(options: ExploreOptions, flags: dict[str, Any], sample_shape: int | None) -> Exploration:
    """The exploration the flags and the file describe; a mistake names the flag."""
    from flowrate.campaigns.explore.options import plan_exploration
    from flowrate.campaigns.process.job import RUN
    from flowrate.cli.sweep import base_from_flags  # the base a sweep's flags give: the same here
    from flowrate.config import FLAG_NAMES
    from flowrate.errors import ConfigError

    try:
        return plan_exploration(options, lambda: base_from_flags(flags, sample_shape, RUN))
    except ConfigError as mistake:
        raise ConfigError(FLAG_NAMES.get(mistake.field, mistake.field), mistake.message) from None
