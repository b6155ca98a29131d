"""`flowrate run`: benchmark one configuration and report it.

Parses flags into a RunConfig (whose defaults are the only defaults) and resolves --scaling to
its stored study; flowrate.campaigns.recorded_run runs, adds to, keeps and sends the result; this
module displays: progress and the summary on stderr, the JSON result on stdout with --json or in a
file with --out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from flowrate.cli.mlflow_option import mlflow_options
from flowrate.cli.options import output_options, run_options

MAX_REPEAT = 1000  # each repeat is a fresh process and a whole run

if TYPE_CHECKING:
    from flowrate.cli.destination import Destination
    from flowrate.cli.progress import LiveProgress
    from flowrate.config import RunConfig
    from flowrate.execution.launch import Launch
    from flowrate.results.schema import Result


@click.command("run")
@run_options
@click.option(
    "--repeat",
    type=click.IntRange(1, MAX_REPEAT),
    default=1,
    help="Run the benchmark N times, each in a fresh process, and combine them. [default: 1]",
)
@click.option(
    "--tensorboard",
    type=click.Path(file_okay=False),
    help="Write TensorBoard event files (Rate, GlobalRate, loss, MFU, power, memory) to this folder.",
)
@click.option(
    "--scaling",
    metavar="STUDY",
    help="With --to-solution: project the job to each size of this stored `flowrate scaling` study "
    "(its name, one of its runs' ids, or its --json report) at the efficiency it measured.",
)
@mlflow_options
@output_options
def command(
    repeat: int,
    tensorboard: str | None,
    scaling: str | None,
    mlflow_uri: str | None,
    mlflow_experiment: str | None,
    store: str | None,
    tags: tuple[str, ...],
    no_store: bool,
    as_json: bool,
    out: str | None,
    quiet: bool,
    sample_shape: int | None,
    **flags: Any,
) -> None:
    """Benchmark one problem: train or infer, timed with Rate and GlobalRate.

    Under torchrun (`torchrun --nproc-per-node N -m flowrate run …`) the run is data-parallel:
    --batch-size is per rank, the throughput is the sum over ranks, and rank 0 alone prints,
    writes --out and records the run.
    """
    import sys

    from flowrate.campaigns.recorded_run import run_and_record
    from flowrate.campaigns.scaling.projection import study_for_run
    from flowrate.cli import console, run_text
    from flowrate.cli.destination import Destination
    from flowrate.cli.mlflow_option import logged_line, open_mlflow
    from flowrate.cli.paths import check_folder
    from flowrate.cli.resolve import resolve_run
    from flowrate.execution.launch import is_primary

    config, problem = resolve_run(flags, sample_shape, out)
    if tensorboard is not None:
        check_folder(tensorboard, "tensorboard")
    launch = _launch(config, repeat)
    quiet = quiet or not is_primary()
    destination = Destination.open(store, tags, no_store, out, quiet, as_json)
    study = study_for_run(scaling, config, repeat, destination.store, store) if scaling is not None else None
    mlflow = open_mlflow(mlflow_uri, mlflow_experiment) if is_primary() else None  # rank 0 logs
    for line in run_text.start_lines(config, problem, launch.world_size if launch is not None else None):
        console.status(line, quiet)
    done = run_and_record(
        config,
        problem,
        _Display(destination, quiet),
        repeat=repeat,
        tensorboard=tensorboard,
        study=study,
        store=destination.store,
        mlflow=mlflow,
        tags=tags,
        argv=sys.argv,
    )
    if mlflow is not None:
        console.status(logged_line(mlflow, done.mlflow_run), quiet)


def _launch(config: RunConfig, repeat: int) -> Launch | None:
    """torchrun's launch (None: started alone); --repeat, which starts fresh processes of one
    whole run, refused with --profile and under torchrun."""
    from flowrate.errors import ConfigError
    from flowrate.execution.launch import launched

    if config.profile_dir is not None and repeat > 1:
        raise ConfigError("profile", "profiles the steps of one run: give it without --repeat")
    launch = launched()
    if launch is not None and repeat > 1:
        raise ConfigError("repeat", "starts fresh processes, not ranks: repeat the torchrun launch instead")
    return launch


class _Display:
    """What `flowrate run` shows as it goes (flowrate.campaigns.recorded_run.RunListener): live
    progress, a line per --repeat run, and the result kept and shown by its Destination."""

    def __init__(self, destination: Destination, quiet: bool) -> None:
        self.destination = destination
        self.quiet = quiet

    def progress(self, config: RunConfig) -> LiveProgress:
        from flowrate.cli import console
        from flowrate.cli.progress import LiveProgress

        return LiveProgress(console.stderr_console(), config, enabled=not self.quiet)

    def repeating(self, repeat: int) -> None:
        from flowrate.cli import console, run_text

        console.status(run_text.repeating_line(repeat), self.quiet)

    def repeat_run(self, index: int, repeat: int, result: Result) -> None:
        from flowrate.cli import console, run_text

        console.status(run_text.repeat_line(index, repeat, result), self.quiet)

    def keep(self, result: Result, interrupted: bool) -> None:
        from flowrate.cli import run_text

        title = f"flowrate run {result.run_id}" + (" (interrupted)" if interrupted else "")
        self.destination.report(result, title, run_text.summary_rows(result))
