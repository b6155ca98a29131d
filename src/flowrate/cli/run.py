"""`flowrate run`: benchmark one configuration and report it.

Parses flags into a RunConfig (whose defaults are the only defaults), calls the library, and
displays: the summary on stderr, the JSON result on stdout with --json or in a file with --out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from flowrate.cli.mlflow_option import mlflow_options
from flowrate.cli.options import output_options, run_options

MAX_REPEAT = 1000  # each repeat is a fresh process and a whole run

if TYPE_CHECKING:
    from flowrate.cli.projection import Study
    from flowrate.config import RunConfig
    from flowrate.results.schema import Result
    from flowrate.results.store import Store


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

    from flowrate.cli import console, run_text
    from flowrate.cli.destination import Destination
    from flowrate.cli.mlflow_option import log_run, open_mlflow
    from flowrate.cli.paths import check_folder
    from flowrate.cli.progress import LiveProgress
    from flowrate.cli.resolve import resolve_run
    from flowrate.errors import ConfigError
    from flowrate.execution.launch import is_primary, launched
    from flowrate.harness.api import run_config
    from flowrate.harness.measured_max import from_store

    config, problem = resolve_run(flags, sample_shape, out)
    if tensorboard is not None:
        check_folder(tensorboard, "tensorboard")
    if config.profile_dir is not None and repeat > 1:
        raise ConfigError("profile", "profiles the steps of one run: give it without --repeat")
    launch = launched()
    if launch is not None and repeat > 1:
        raise ConfigError("repeat", "starts fresh processes, not ranks: repeat the torchrun launch instead")
    quiet = quiet or not is_primary()
    destination = Destination.open(store, tags, no_store, out, quiet, as_json)
    study = _study(scaling, config, destination.store, store, repeat) if scaling is not None else None
    mlflow = open_mlflow(mlflow_uri, mlflow_experiment) if is_primary() else None  # rank 0 logs
    if launch is not None:
        console.status(run_text.data_parallel_line(launch.world_size), quiet)
    console.status(run_text.start_line(config, problem), quiet)
    if repeat > 1:
        from flowrate.campaigns.repeat import RepeatInterrupted

        try:
            result = _run_repeated(config, repeat, tensorboard, quiet)
        except RepeatInterrupted as cut:  # the finished runs are kept, then the command exits 130
            title = f"flowrate run {cut.partial.run_id} (interrupted)"
            destination.report(cut.partial, title, run_text.summary_rows(cut.partial))
            raise KeyboardInterrupt from None
    else:
        with LiveProgress(console.stderr_console(), config, enabled=not quiet) as progress:
            result = run_config(config, problem, argv=sys.argv, on_interval=progress, tensorboard=tensorboard)
    result = from_store(result, destination.store)  # MFU against a stored survey's matmul maximum
    if study is not None:
        from flowrate.cli.projection import projected

        result = projected(result, study)
    destination.report(result, f"flowrate run {result.run_id}", run_text.summary_rows(result))
    if mlflow is not None:  # after the run is recorded: MLflow failing loses nothing
        log_run(mlflow, result, tags, destination.store is not None, quiet)


def _study(scaling: str, config: RunConfig, opened: Store | None, store: str | None, repeat: int) -> Study:
    """The --scaling study, found and checked before the run (flowrate.cli.projection), in the
    store the run records to, else (--no-store, a rank other than 0) read from --store or the
    default store."""
    from flowrate.cli.projection import FIELD, check_study, load_study
    from flowrate.errors import ConfigError
    from flowrate.results.store import Store

    if config.to_solution is None:
        raise ConfigError(FIELD, "projects a job's time to solution: give --to-solution AMOUNT too")
    if repeat > 1:
        raise ConfigError(FIELD, "projects one run's time to solution: give it without --repeat")
    if opened is not None:
        study = load_study(opened, scaling)
    else:
        with Store(store, readonly=True) as reading:
            study = load_study(reading, scaling)
    check_study(study, config)
    return study


def _run_repeated(config: RunConfig, repeat: int, tensorboard: str | None, quiet: bool) -> Result:
    import sys

    from flowrate.campaigns.repeat import run_repeated
    from flowrate.cli import console, run_text

    console.status(f"{repeat} runs, each in a fresh process", quiet)
    return run_repeated(
        config,
        repeat,
        argv=sys.argv,
        tensorboard=tensorboard,
        on_run=lambda index, result: console.status(run_text.repeat_line(index, repeat, result), quiet),
    )
