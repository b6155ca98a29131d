"""Where a campaign's points run (`flowrate sweep`, `flowrate explore`): --executor local|slurm and
the Slurm job's options, checked as the command line is read, before any run.

A command takes ``@executor_options`` and receives one ``executor: ExecutorChoice`` argument;
``choice.open(store, campaign, argv)`` gives the Executor (flowrate.campaigns.process.executor).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from flowrate.campaigns.process.executor import Executor

LOCAL = "local"
SLURM = "slurm"
# the slurm-only options, by parameter name, and their flags
_SLURM_ONLY = {
    "slurm_partition": "--slurm-partition",
    "gpus_per_point": "--gpus-per-point",
    "max_parallel": "--max-parallel",
    "time_limit": "--time-limit",
    "executor_folder": "--executor-folder",
}
DEFAULT_MAX_PARALLEL = 8
DEFAULT_TIME_LIMIT_MIN = 60


@dataclass(frozen=True)
class ExecutorChoice:
    """The executor the flags ask for, checked; the Slurm fields are None for local."""

    kind: str = LOCAL
    partition: str | None = None
    gpus_per_point: int | None = None
    max_parallel: int | None = None
    time_limit_min: int | None = None
    folder: str | None = None

    def open(self, store: str | None, campaign: str, argv: list[str] | None) -> Executor:
        """Local: each point in a fresh process here. Slurm: each a job, its files in the folder
        (default: flowrate-jobs beside the store), under ``campaign`` (a sweep's id)."""
        from flowrate.campaigns.process.executor import LocalExecutor

        if self.kind == LOCAL:
            return LocalExecutor(argv)
        from flowrate.campaigns.process.cluster import JOBS_FOLDER, ClusterOptions, SubmititExecutor
        from flowrate.results.store import store_path

        folder = Path(self.folder) if self.folder else store_path(store).resolve().parent / JOBS_FOLDER
        options = ClusterOptions(
            folder=folder,
            partition=self.partition,
            gpus_per_point=self.gpus_per_point,
            max_parallel=self.max_parallel or DEFAULT_MAX_PARALLEL,
            time_limit_min=self.time_limit_min or DEFAULT_TIME_LIMIT_MIN,
        )
        return SubmititExecutor(options, campaign, argv)


def choose_executor(kind: str, **given: Any) -> ExecutorChoice:
    """The choice the flags make; ConfigError (one line, exit 2) for a slurm-only flag given with
    local, or slurm where submitit, sbatch or srun is missing."""
    from flowrate.errors import ConfigError

    if kind == LOCAL:
        stray = [flag for name, flag in _SLURM_ONLY.items() if given.get(name) is not None]
        if stray:
            raise ConfigError(stray[0], "only --executor slurm takes it; drop it or add --executor slurm")
        return ExecutorChoice()
    from flowrate.campaigns.process.cluster import check_slurm_available

    check_slurm_available()
    return ExecutorChoice(
        SLURM,
        given.get("slurm_partition"),
        given.get("gpus_per_point"),
        given.get("max_parallel"),
        given.get("time_limit"),
        given.get("executor_folder"),
    )


_OPTIONS = [
    click.option(
        "--executor",
        "executor_kind",
        type=click.Choice([LOCAL, SLURM]),
        default=LOCAL,
        show_default=True,
        help="Where points run: local (one after another, each in a fresh process) or slurm (each a "
        "job through submitit; its Result JSON written to --executor-folder and imported here).",
    ),
    click.option("--slurm-partition", help="slurm: the partition to submit to. [default: the cluster's]"),
    click.option(
        "--gpus-per-point",
        type=click.IntRange(0),
        help="slurm: GPUs of each point's job. [default: none asked]",
    ),
    click.option(
        "--max-parallel",
        type=click.IntRange(1),
        help=f"slurm: points running at once (the array's %N). [default: {DEFAULT_MAX_PARALLEL}]",
    ),
    click.option(
        "--time-limit",
        type=click.IntRange(1),
        metavar="MINUTES",
        help=f"slurm: each point's time limit. [default: {DEFAULT_TIME_LIMIT_MIN}]",
    ),
    click.option(
        "--executor-folder",
        type=click.Path(file_okay=False),
        help="slurm: a folder shared with the cluster's nodes, for jobs and results. "
        "[default: flowrate-jobs beside the store]",
    ),
]


def executor_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The --executor flags, handed to ``command`` as one checked ``executor: ExecutorChoice``."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = {name: kwargs.pop(name) for name in _SLURM_ONLY}
        kwargs["executor"] = choose_executor(kwargs.pop("executor_kind"), **given)
        return command(*args, **kwargs)

    for option in reversed(_OPTIONS):
        wrapper = option(wrapper)
    return wrapper
