"""`--mlflow [URI]` and `--mlflow-experiment NAME`, shared by `flowrate run`, `export` and `sweep`
(which sends its recorded points once it ends).

The store is checked (and the experiment made) before anything is measured or sent, in a process
of its own, so a bad URI or a server that is down is bad input said in one line; this process
imports mlflow only to send, once the figures are taken, and every request is bounded
(flowrate.results.mlflow_log).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from flowrate.results.mlflow_log import DEFAULT_EXPERIMENT, DEFAULT_URI

if TYPE_CHECKING:
    from flowrate.results.mlflow_log import MlflowLog
    from flowrate.results.store import StoredRun


def mlflow_options(function: Callable[..., Any]) -> Callable[..., Any]:
    uri = click.option(
        "--mlflow",
        "mlflow_uri",
        is_flag=False,
        flag_value=DEFAULT_URI,
        metavar="[URI]",
        help="Log to MLflow: config as params, figures and every interval's Rate and GlobalRate as "
        f"metrics, the result JSON as an artifact. [URI default: {DEFAULT_URI}]",
    )
    experiment = click.option(
        "--mlflow-experiment",
        metavar="NAME",
        help=f"The MLflow experiment to log into (made if new). [default: {DEFAULT_EXPERIMENT}]",
    )
    return uri(experiment(function))


def open_mlflow(uri: str | None, experiment: str | None) -> MlflowLog | None:
    """The tracking store the options name, checked now (in a process of its own); None without
    --mlflow."""
    from flowrate.errors import ConfigError

    if uri is None:
        if experiment is not None:
            raise ConfigError("mlflow_experiment", "needs --mlflow [URI]")
        return None
    from flowrate.results.mlflow_log import MlflowLog

    return MlflowLog.open(uri, experiment or DEFAULT_EXPERIMENT)


def logged_line(log: MlflowLog, sent: str | None) -> str:
    """A run sent (flowrate.campaigns.recorded_run.send_run): where, and as which MLflow run; or
    that MLflow already held it (``sent`` None), so nothing was sent."""
    if sent is None:
        return f"already in MLflow experiment {log.experiment} in {log.uri}: not sent again"
    return f"logged to MLflow experiment {log.experiment} as run {sent} in {log.uri}"


def send_runs(log: MlflowLog, runs: list[StoredRun], quiet: bool = False) -> None:
    """Each run that MLflow does not hold yet, in order (MlflowLog.send_all), then how many."""
    from flowrate.cli import console
    from flowrate.units import counted

    sent = log.send_all(runs)
    there = len(runs) - sent
    already = f"; {counted(there, 'run')} already there" if there else ""
    sent_line = f"{counted(sent, 'run')} sent to MLflow experiment {log.experiment} in {log.uri}{already}"
    console.status(sent_line, quiet)
