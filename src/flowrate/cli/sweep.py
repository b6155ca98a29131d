"""`flowrate sweep`: a grid over run options, each point in a fresh process, recorded as it ends.

The sweep itself (grid, order, out-of-memory skipping, resume) lives in flowrate.campaigns.sweep;
this module parses flags, shows progress (cli/sweep_display.py) and prints the table
(cli/sweep_text.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from flowrate.cli.executor_options import ExecutorChoice, executor_options
from flowrate.cli.mlflow_option import mlflow_options
from flowrate.cli.options import STORE_HELP, checked_tags, run_options

if TYPE_CHECKING:
    from flowrate.campaigns.sweep.run import SweepOutcome
    from flowrate.campaigns.sweep.spec import PlannedPoint, SweepSpec

GRID_HELP = (
    "An option to vary and its values (repeatable): a RunConfig field or flag name "
    "(batch_size, precision, mode, problem, size, lr, seq_len, …) or a problem option (m, hidden, …). "
    "Values are a comma list; A..B doubles from A up to B for integers (1..512 is 1,2,4,…,512). "
    "With --generate: batch_size, prompt_len, new_tokens, repeats, warmup, precision, …"
)


@click.command("sweep")
@run_options
@click.option("-g", "--grid", "grid", multiple=True, metavar="KEY=V1,V2,…", help=GRID_HELP)
@click.option(
    "-f",
    "--file",
    "sweep_file",
    type=click.Path(dir_okay=False),
    help='TOML sweep file: name = "…", a [base] table of run options and a [grid] table of '
    'key = [values] (or "1..512"). Flags override it.',
)
@click.option(
    "--generate",
    is_flag=True,
    help="Each point runs `flowrate generate` (KV-cache generation: TTFT, decode tokens/s) instead of "
    '`flowrate run`; grid keys are its options (a sweep file says so with command = "generate").',
)
@click.option("--name", help="Name of the sweep (tags its runs sweep:NAME). [default: sweep-<id>]")
@click.option(
    "--store", type=click.Path(dir_okay=False), help="Record the sweep in this store. " + STORE_HELP
)
@click.option(
    "-t", "--tag", "tags", multiple=True, callback=checked_tags, help="Label every recorded run (repeatable)."
)
@click.option("--retry-failed", is_flag=True, help="Run failed and skipped points of a resumed sweep again.")
@click.option("--dry-run", is_flag=True, help="List the points (and which are recorded); run nothing.")
@executor_options
@mlflow_options
@click.option(
    "-q", "--quiet", is_flag=True, help="No progress or status lines on stderr (the table still prints)."
)
def command(
    grid: tuple[str, ...],
    sweep_file: str | None,
    generate: bool,
    name: str | None,
    store: str | None,
    tags: tuple[str, ...],
    retry_failed: bool,
    dry_run: bool,
    mlflow_uri: str | None,
    mlflow_experiment: str | None,
    quiet: bool,
    executor: ExecutorChoice,
    sample_shape: int | None,
    **flags: Any,
) -> None:
    """Run a grid of benchmarks, each point in a fresh process, recorded in the results store.

    Every `flowrate run` option sets the base all points share; -g KEY=V1,V2,… (or a --file)
    sets what varies, e.g. -g batch_size=1..512 -g precision=fp32,bf16. Within a branch batch
    sizes run ascending: a point that runs out of memory is recorded failed and the larger
    batches of its branch are recorded skipped. Running the same sweep again resumes it: points
    already recorded are not run again (a new --name starts it afresh). --generate sweeps
    `flowrate generate` instead (e.g. -g batch_size=1,4 -g prompt_len=16,32 -g new_tokens=8).
    --executor slurm submits each point as a job (up to --max-parallel at once) and imports the
    Result each writes to a shared folder.

    Exit codes: 0 every point done (or stopped by memory); 1 some point failed otherwise; 2 bad
    input; 130 interrupted (what was recorded is kept).
    """
    from flowrate.campaigns.sweep.recorded import sweep_runs
    from flowrate.cli import console, sweep_text
    from flowrate.cli.mlflow_option import open_mlflow, send_runs
    from flowrate.errors import RunFailed

    spec, points = _plan(grid, sweep_file, generate, name, flags, sample_shape)
    if dry_run:
        _dry_run(spec, points, store)
        return
    mlflow = open_mlflow(mlflow_uri, mlflow_experiment)
    outcome = _run(spec, points, store, tags, retry_failed, quiet, executor)
    header, rows, right_aligned = sweep_text.summary_table(outcome.reports, spec.command)
    console.grid(sweep_text.title(outcome.name, outcome.sweep_id), header, rows, right_aligned=right_aligned)
    if mlflow is not None:  # the sweep's recorded runs, resumed ones too: MLflow skips those it has
        send_runs(mlflow, sweep_runs(outcome.sweep_id, store), quiet)
    if outcome.failed_otherwise:
        raise RunFailed(sweep_text.failed_message(outcome.failed_otherwise, len(points)))


def _run(
    spec: SweepSpec,
    points: list[PlannedPoint],
    store: str | None,
    tags: tuple[str, ...],
    retry_failed: bool,
    quiet: bool,
    executor: ExecutorChoice,
) -> SweepOutcome:
    """Run (or resume) the sweep with its live display; an interruption says what was recorded."""
    import sys

    from flowrate.campaigns.sweep.run import SweepInterrupted, sweep_in_store  # imports torch
    from flowrate.cli import console, sweep_text
    from flowrate.cli.sweep_display import SweepDisplay

    with SweepDisplay(quiet) as display:
        try:
            return sweep_in_store(
                spec,
                store,
                lambda sweep_id: executor.open(store, sweep_id, sys.argv),
                points=points,
                tags=tags,
                retry_failed=retry_failed,
                listener=display,
            )
        except SweepInterrupted as cut:
            display.close()
            console.status(sweep_text.interrupted_line(spec, cut.recorded, len(points)))
            raise


def _plan(
    grid: tuple[str, ...],
    sweep_file: str | None,
    generate: bool,
    name: str | None,
    flags: dict[str, Any],
    sample_shape: int | None,
) -> tuple[SweepSpec, list[PlannedPoint]]:
    """The sweep the flags and the file describe, and its points; a mistake names the flag."""
    from flowrate.campaigns.process.job import GENERATE
    from flowrate.campaigns.sweep.spec import load_sweep_file, merge_spec, parse_grid_flags, plan_points
    from flowrate.config import FLAG_NAMES
    from flowrate.errors import ConfigError

    asked = GENERATE if generate else None
    try:
        file = load_sweep_file(sweep_file, asked) if sweep_file else None
        command = file.command if file else asked or "run"
        base = base_from_flags(flags, sample_shape, command)
        spec = merge_spec(base, parse_grid_flags(grid, command), file, name, command)
        return spec, plan_points(spec)
    except ConfigError as mistake:
        raise ConfigError(FLAG_NAMES.get(mistake.field, mistake.field), mistake.message) from None


def base_from_flags(flags: dict[str, Any], sample_shape: int | None, command: str) -> dict[str, Any]:
    """The options given as flags (a flag left out sets nothing, so a file's base shows through)."""
    from flowrate.campaigns.process.job import GENERATE
    from flowrate.campaigns.sweep.spec import SAMPLE_SHAPE, parse_base
    from flowrate.cli.resolve import given_fields
    from flowrate.config import Mode
    from flowrate.errors import ConfigError

    mode = flags.pop("mode") if command == GENERATE else None  # generation is inference
    if mode is not None and Mode.parse(mode) != Mode.INFER:
        raise ConfigError("--mode", "generate runs inference only: drop --mode train")
    base = parse_base(given_fields(flags, None), None, command)
    if sample_shape is not None:
        if command == GENERATE:
            raise ConfigError("--sample-shape", "not a generate option: give --seq-len (the context)")
        base[SAMPLE_SHAPE] = sample_shape  # resolved per point: the problem may vary
    return base


def _dry_run(spec: SweepSpec, points: list[PlannedPoint], store: str | None) -> None:
    """List the points and what the store already holds of them; open (create) nothing."""
    from flowrate.campaigns.sweep.recorded import recorded_points
    from flowrate.cli import console, sweep_text

    recorded = recorded_points(spec, store)
    console.status(sweep_text.dry_run_line(spec, points, recorded))
    header, rows = sweep_text.dry_run_table(spec, points, recorded)
    console.grid(f"{sweep_text.title(spec.label, spec.sweep_id)}, dry run", header, rows, (0,))
