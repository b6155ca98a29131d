"""`flowrate run` once its flags are read: the run, what is added to it, its record and MLflow.

``run_and_record`` runs the configuration once in this process (flowrate.harness.api.run_config)
or ``repeat`` times in fresh processes (flowrate.campaigns.repeat), then, in this order: gives it
its MFU against a stored survey's matmul maximum (flowrate.harness.measured_max), projects its
time to solution to a --scaling study's sizes (flowrate.campaigns.scaling.projection), hands it to
the listener to keep (--out, the store) and show, and last sends it to MLflow, so that MLflow
failing loses nothing. An interrupted --repeat keeps the runs that finished, then ends as
interrupted.

The Python API's ``flowrate.benchmark`` runs ``run_config`` alone: it records nothing and adds no
stored survey's MFU, so it does not go through here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from flowrate.config import RunConfig
from flowrate.errors import RunFailed
from flowrate.results.schema import IntervalRecord, Result

if TYPE_CHECKING:
    from flowrate.campaigns.scaling.projection import Study
    from flowrate.problems.base import Problem
    from flowrate.results.mlflow_log import MlflowLog
    from flowrate.results.store import Store


class RunListener(Protocol):
    """What the caller sees of a run as it goes, and where its result is kept."""

    def progress(self, config: RunConfig) -> AbstractContextManager[Callable[[IntervalRecord], None]]:
        """Around the one run in this process: the context gives its on_interval listener."""
        ...

    def repeating(self, repeat: int) -> None:
        """Before the first of ``repeat`` runs, each in a fresh process."""
        ...

    def repeat_run(self, index: int, repeat: int, result: Result) -> None:
        """As run ``index`` (from 0) of ``repeat`` ends."""
        ...

    def keep(self, result: Result, interrupted: bool) -> None:
        """Record and show the result (before MLflow); ``interrupted``: the finished runs of an
        interrupted --repeat, combined."""
        ...


@dataclass(frozen=True)
class RecordedRun:
    result: Result  # as kept: with the survey's MFU and the projection
    mlflow_run: str | None  # the MLflow run it was sent as; None without MLflow or when already there


def run_and_record(
    config: RunConfig,
    problem: Problem | None,
    listener: RunListener,
    *,
    repeat: int = 1,
    tensorboard: str | None = None,
    study: Study | None = None,
    store: Store | None = None,
    mlflow: MlflowLog | None = None,
    tags: Sequence[str] = (),
    argv: list[str] | None = None,
) -> RecordedRun:
    """Run ``config`` (``repeat`` times), add to it, keep it and send it, as the module says.

    ``store``: the store the listener records to (None: --no-store), whose surveys give the MFU.
    """
    from flowrate.harness.measured_max import from_store

    result = _measure(config, problem, listener, repeat, tensorboard, argv)
    result = from_store(result, store)
    if study is not None:
        from flowrate.campaigns.scaling.projection import projected

        result = projected(result, study)
    listener.keep(result, interrupted=False)
    sent = send_run(mlflow, result, tags, recorded=store is not None) if mlflow is not None else None
    return RecordedRun(result, sent)


def _measure(
    config: RunConfig,
    problem: Problem | None,
    listener: RunListener,
    repeat: int,
    tensorboard: str | None,
    argv: list[str] | None,
) -> Result:
    """The run, or --repeat's runs combined; an interruption after some runs keeps those first."""
    if repeat == 1:
        from flowrate.harness.api import run_config

        with listener.progress(config) as progress:
            return run_config(config, problem, argv=argv, on_interval=progress, tensorboard=tensorboard)
    from flowrate.campaigns.repeat import RepeatInterrupted, run_repeated

    listener.repeating(repeat)
    try:
        return run_repeated(
            config,
            repeat,
            argv=argv,
            tensorboard=tensorboard,
            on_run=lambda index, result: listener.repeat_run(index, repeat, result),
        )
    except RepeatInterrupted as cut:  # the finished runs are kept, then the command exits 130
        listener.keep(cut.partial, interrupted=True)
        raise KeyboardInterrupt from None


def send_run(log: MlflowLog, result: Result, tags: Sequence[str], recorded: bool) -> str | None:
    """Send a finished run to MLflow (its MLflow run id); a failure says the run itself is kept
    and how to send it again."""
    try:
        return log.send(result, tags)
    except RunFailed as error:
        kept = (
            f"the run is recorded as {result.run_id}: send it with `flowrate export --mlflow {log.uri} "
            f"{result.run_id}`"
            if recorded
            else "the run was not recorded (--no-store)"
        )
        raise RunFailed(f"{error}; {kept}") from None
