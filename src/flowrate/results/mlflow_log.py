"""MLflow: a finished run's config as params, its figures as metrics, every interval's Rate and
GlobalRate as metric histories (step: the interval's index), and the Result JSON as an artifact.

A run is logged from its Result once it is recorded, not at each sample point as TensorBoard is:
a tracking-store write is a database transaction or an HTTP request, and none belongs inside the
timed loop; the Result's intervals carry every sample point anyway. `flowrate export --mlflow`
sends recorded runs the same way. Each MLflow run is tagged with its flowrate run id, and a run
that is already there (finished) is not sent again.

Names: params are the config's fields (nested ones joined by dots: ``problem_options.m``; a
``batch_size`` left to the problem's default is the batch the run used) and ``result.batch_size``,
the batch the run used; metrics are the summary's fields under their own
names, the numbers of the problem, flops, energy, memory, repeat and fidelity sections as
``problem/parameters``, ``flops/mfu`` and so on, and the intervals' figures as
``interval/rate_samples_per_sec`` (Rate), ``interval/global_samples_per_sec`` (GlobalRate) and the
other per-interval fields present; a checkpoint interval logs ``interval/checkpoint_s`` only.
Interval timestamps count back from ``created_at`` (set when the Result was assembled, just after
the timed loop) by the timed seconds left after each interval.

A store is opened twice: before anything is measured, in a process of its own (a bad URI or a
server that is down is bad input, said before the run; mlflow's import stays out of the measured
process, whose peak RSS it would otherwise raise), and in this process at the first send, after
the figures are taken. mlflow is imported only here, and in this process only then.

Every request flowrate makes is bounded (BOUNDED_HTTP): a tracking server that is down, answers
500 or hangs is said in one line within seconds, where MLflow's own retries wait minutes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowrate.errors import ConfigError, FlowrateError, RunFailed
from flowrate.results.codec import encode
from flowrate.results.environment import environment_fingerprint

if TYPE_CHECKING:
    from flowrate.results.schema import IntervalRecord, Result
    from flowrate.results.store import StoredRun

DEFAULT_URI = "sqlite:///mlflow.db"  # MLflow 3 refuses a new ./mlruns file store by default
DEFAULT_EXPERIMENT = "flowrate"
ARTIFACT = "result.json"
RUN_ID_TAG = "flowrate.run_id"
INSTALL = "MLflow is not installed: pip install -e '.[mlflow]'"

# Result sections whose top-level numbers become metrics, as SECTION/FIELD.
_SECTIONS = ("problem", "flops", "energy", "memory", "repeat", "fidelity")
# Per-interval figures logged when present (Rate and GlobalRate always, for compute intervals).
_INTERVAL_FIELDS = (
    "rate_samples_per_sec",
    "global_samples_per_sec",
    "samples_per_sec",
    "loss",
    "mfu",
    "model_flops_per_sec",
    "power_w",
    "device_memory_allocated_bytes",
    "process_rss_bytes",
    "input_wait_s",
    "input_bound_share",
)
# What MLflow's names may hold on every platform (mlflow.utils.validation allows ':' off Windows).
_NAME_REFUSED = re.compile(r"[^\w./\- ]")
# MLflow's settings for flowrate's own requests, each unless the user set it: two tries, the
# second at once, of at most 5 s each (MLflow's defaults: 8 tries with waits doubling from 2 s,
# of 120 s each). MLflow reads them at every request.
BOUNDED_HTTP = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "5",
}
# Seconds the check's process may take in all (a store that waits on a lock, say) before the
# store is refused.
CHECK_LIMIT_S = 120.0


def params(result: Result) -> dict[str, str]:
    """The config's fields as MLflow params, within MLflow's limits on names and values."""
    from mlflow.utils.validation import MAX_ENTITY_KEY_LENGTH, MAX_PARAM_VAL_LENGTH

    flat = _flatten(encode(result.config))
    if flat.get("batch_size") is None:  # the problem's default: the batch the run used
        flat["batch_size"] = result.batch_size
    flat["result.batch_size"] = result.batch_size
    out: dict[str, str] = {}
    for key, value in flat.items():
        text = value if isinstance(value, str) else json.dumps(value)
        if len(text) > MAX_PARAM_VAL_LENGTH:  # the whole value is in the artifact
            text = text[: MAX_PARAM_VAL_LENGTH - 1] + "…"
        out[_name(key)[:MAX_ENTITY_KEY_LENGTH]] = text
    return out


def summary_metrics(result: Result) -> dict[str, float]:
    """The summary's numbers under their own names, and the sections' numbers as SECTION/FIELD."""
    values = {key: value for key, value in asdict(result.summary).items() if _is_number(value)}
    for section in _SECTIONS:
        typed = getattr(result, section)
        content = encode(typed) if typed is not None else {}
        values.update({f"{section}/{_name(k)}": v for k, v in content.items() if _is_number(v)})
    return {key: float(value) for key, value in values.items()}


def interval_metrics(result: Result) -> list[tuple[str, float, int, int]]:
    """(key, value, timestamp in ms, step) for every interval's figures; the step is its index."""
    end_ms = _ms(result.created_at)
    duration = result.summary.timed_duration_s
    out: list[tuple[str, float, int, int]] = []
    for record in result.intervals:
        stamp = end_ms - round(max(duration - record.elapsed_s, 0.0) * 1000)
        for key, value in interval_values(record).items():
            out.append((f"interval/{key}", value, stamp, record.index))
    return out


def interval_values(record: IntervalRecord) -> dict[str, float]:
    """One interval's figures: a checkpoint interval's seconds, or a compute interval's rates."""
    if record.kind == "checkpoint":
        return {"checkpoint_s": record.seconds}
    present = {name: getattr(record, name) for name in _INTERVAL_FIELDS}
    return {name: float(value) for name, value in present.items() if value is not None}


def run_tags(result: Result, tags: Sequence[str] = ()) -> dict[str, str]:
    """The flowrate run id, version, problem, machine fingerprint, git commit and the run's tags."""
    env = result.environment
    out = {
        RUN_ID_TAG: result.run_id,
        "flowrate.version": result.flowrate_version,
        "flowrate.problem": str(result.problem.spec or (result.problem.name or "")),
        "flowrate.mode": str(result.config.mode or ""),
    }
    fingerprint = environment_fingerprint(env)
    out.update({f"flowrate.machine.{k}": str(v) for k, v in fingerprint.items() if v is not None})
    if env.hostname:
        out["flowrate.machine.hostname"] = str(env.hostname)
    source = env.flowrate
    if source is not None and source.commit:
        out["mlflow.source.git.commit"] = str(source.commit)  # MLflow's own tag for it
        out["flowrate.git_dirty"] = str(bool(source.dirty))
    if tags:
        out["flowrate.tags"] = ", ".join(tags)
    from mlflow.utils.validation import MAX_TAG_VAL_LENGTH

    return {key: value[:MAX_TAG_VAL_LENGTH] for key, value in out.items()}


class MlflowLog:
    """An MLflow tracking store and experiment: checked before anything is measured, in a process
    of its own, and opened in this one at the first send (module docstring)."""

    def __init__(self, uri: str, experiment: str, experiment_id: str, client: Any = None) -> None:
        self.uri, self.experiment, self.experiment_id = uri, experiment, experiment_id
        self._client = client

    @classmethod
    def open(cls, uri: str, experiment: str = DEFAULT_EXPERIMENT) -> MlflowLog:
        """The store at ``uri`` with ``experiment`` (made if new), checked in a process of its own;
        a store that cannot be used is a ConfigError("mlflow"): bad input, said in one line."""
        _check_uri(uri)
        if importlib.util.find_spec("mlflow") is None:
            raise FlowrateError(INSTALL)
        return cls(uri, experiment, _check_in_child(uri, experiment))

    @classmethod
    def open_here(cls, uri: str, experiment: str = DEFAULT_EXPERIMENT) -> MlflowLog:
        """The store at ``uri`` with ``experiment`` (made if new), opened in this process."""
        _check_uri(uri)
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise FlowrateError(INSTALL) from None
        _quiet_logs()
        with bounded_http():
            try:
                client = MlflowClient(tracking_uri=uri)
                found = client.get_experiment_by_name(experiment)
                if found is None:
                    experiment_id = client.create_experiment(experiment, _artifact_location(uri))
                elif found.lifecycle_stage != "active":
                    raise ConfigError(
                        "mlflow_experiment",
                        f"{experiment!r} is deleted in {uri}: restore it (mlflow experiments restore) "
                        "or name another",
                    )
                else:
                    experiment_id = found.experiment_id
            except FlowrateError:
                raise
            except Exception as error:  # any failure of a third-party store: one line, not a traceback
                raise ConfigError(
                    "mlflow", f"cannot use tracking store {uri}: {_first_line(error)}"
                ) from None
        return cls(uri, experiment, experiment_id, client)

    def logged(self, run_id: str) -> str | None:
        """The MLflow run already holding flowrate run ``run_id`` (finished), if there is one."""
        with bounded_http():
            found = self._opened().search_runs(
                [self.experiment_id],
                filter_string=f"tags.`{RUN_ID_TAG}` = '{run_id}' and attributes.status = 'FINISHED'",
                max_results=1,
            )
        return found[0].info.run_id if found else None

    def send(self, result: Result, tags: Sequence[str] = ()) -> str | None:
        """Log ``result`` as a new MLflow run; its id, or None when the run was already there.

        A failure deletes the half-logged run (so a later export sends it whole) and is a
        RunFailed, in one line.
        """
        try:
            if self.logged(result.run_id) is not None:
                return None
            with bounded_http():
                return self._log(result, tags)
        except FlowrateError:
            raise
        except Exception as error:
            raise RunFailed(f"MLflow logging to {self.uri} failed: {_first_line(error)}") from None

    def send_all(self, runs: Sequence[StoredRun]) -> int:
        """Each of ``runs`` that MLflow does not hold yet, in order; how many were sent. A failure
        is a RunFailed naming the run it stopped at and how many were sent before it."""
        from flowrate.units import counted

        sent = 0
        for run in runs:
            try:
                sent += self.send(run.result, run.tags) is not None
            except RunFailed as error:
                where = f"at run {run.run_id}; {counted(sent, 'run')} sent before it"
                raise RunFailed(f"{error} ({where})") from None
        return sent

    def _opened(self) -> Any:
        """This process's client, made at the first use."""
        if self._client is None:
            try:
                from mlflow.tracking import MlflowClient
            except ImportError:
                raise FlowrateError(INSTALL) from None
            _quiet_logs()
            self._client = MlflowClient(tracking_uri=self.uri)
        return self._client

    def _log(self, result: Result, tags: Sequence[str]) -> str:
        from mlflow.entities import Metric, Param, RunTag
        from mlflow.utils.validation import MAX_METRICS_PER_BATCH, MAX_PARAMS_TAGS_PER_BATCH

        client = self._opened()
        end_ms = _ms(result.created_at)
        start_ms = end_ms - round((result.summary.timed_duration_s + result.summary.preheat_s) * 1000)
        name = f"{result.problem.name or 'run'}-{result.run_id}"
        run = client.create_run(self.experiment_id, start_time=start_ms, run_name=name)
        mlflow_id: str = run.info.run_id
        try:
            tag_list = [RunTag(k, v) for k, v in run_tags(result, tags).items()]
            param_list = [Param(k, v) for k, v in params(result).items()]
            metrics = [Metric(k, v, end_ms, 0) for k, v in summary_metrics(result).items()]
            metrics += [Metric(k, v, stamp, step) for k, v, stamp, step in interval_metrics(result)]
            for part in _chunks(tag_list, MAX_PARAMS_TAGS_PER_BATCH):
                client.log_batch(mlflow_id, tags=part)
            for part in _chunks(param_list, MAX_PARAMS_TAGS_PER_BATCH):
                client.log_batch(mlflow_id, params=part)
            for part in _chunks(metrics, MAX_METRICS_PER_BATCH):
                client.log_batch(mlflow_id, metrics=part)
            client.log_text(mlflow_id, result.to_json() + "\n", ARTIFACT)
            client.set_terminated(mlflow_id, "FINISHED", end_time=end_ms)
        except BaseException:
            with contextlib.suppress(Exception):  # best effort: the error that matters is above
                client.delete_run(mlflow_id)
            raise
        return mlflow_id


def check_main(argv: Sequence[str]) -> int:
    """The check's process (_check_in_child): open the store URI EXPERIMENT here and write one
    JSON line to stdout, the experiment's id or the error's field and message; the error's exit
    code."""
    uri, experiment = argv
    code = 0
    try:
        answer: dict[str, str | None] = {"experiment_id": MlflowLog.open_here(uri, experiment).experiment_id}
    except ConfigError as error:
        answer, code = {"field": error.field, "message": error.message}, error.exit_code
    except FlowrateError as error:
        answer, code = {"field": None, "message": str(error)}, error.exit_code
    sys.stdout.write(json.dumps(answer) + "\n")
    return code


_CHECK_CODE = (
    "import sys; from flowrate.results.mlflow_log import check_main; sys.exit(check_main(sys.argv[1:]))"
)


def _check_in_child(uri: str, experiment: str) -> str:
    """Open the store in a process of its own (check_main) with this process's module path and
    bounded requests; the experiment's id, or its error raised here. An interrupt here ends it."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    environment.update({k: v for k, v in BOUNDED_HTTP.items() if k not in os.environ})
    refused = f"cannot use tracking store {uri}"
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHECK_CODE, uri, experiment],
            env=environment,
            capture_output=True,
            text=True,
            timeout=CHECK_LIMIT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ConfigError("mlflow", f"{refused}: no answer within {CHECK_LIMIT_S:g} s") from None
    lines = done.stdout.strip().splitlines()
    try:
        said = json.loads(lines[-1])
    except (IndexError, ValueError):
        last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise ConfigError("mlflow", f"{refused}: its check failed: {last[:300]}") from None
    if "experiment_id" in said:
        return str(said["experiment_id"])
    if said["field"] is None:
        raise FlowrateError(said["message"])
    raise ConfigError(said["field"], said["message"])


def _check_uri(uri: str) -> None:
    """A tracking URI names its scheme: a bare word is more likely a run id taken for the URI."""
    scheme, sep, _ = uri.partition(":")
    if uri == "databricks" or (sep and len(scheme) > 1 and scheme.replace("+", "").isalnum()):
        return
    raise ConfigError(
        "mlflow",
        f"{uri!r} is not a tracking URI (sqlite:///PATH.db, http://HOST:PORT, …); "
        "for the default store write --mlflow last or --mlflow=" + DEFAULT_URI,
    )


def _artifact_location(uri: str) -> str | None:
    """Beside a SQLite store, in mlartifacts/ (as `mlflow server` does), not in the current folder."""
    if not uri.startswith("sqlite:///") or uri.endswith(":memory:"):
        return None
    return str(Path(uri[len("sqlite:///") :]).resolve().parent / "mlartifacts")


@contextlib.contextmanager
def bounded_http() -> Iterator[None]:
    """MLflow's requests in the block are bounded (BOUNDED_HTTP); a variable the user set is kept."""
    unset = [name for name in BOUNDED_HTTP if name not in os.environ]
    os.environ.update({name: BOUNDED_HTTP[name] for name in unset})
    try:
        yield
    finally:
        for name in unset:
            os.environ.pop(name, None)


def _quiet_logs() -> None:
    """MLflow and alembic announce each table they create on a new store: not the user's business."""
    import logging

    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _flatten(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict) and value:
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _name(key: object) -> str:
    return _NAME_REFUSED.sub("_", str(key))


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _ms(iso: str) -> int:
    """Milliseconds since the epoch of an ISO time (a record without one: now)."""
    moment = dt.datetime.fromisoformat(iso) if iso else dt.datetime.now(dt.UTC)
    return round(moment.timestamp() * 1000)


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    line = text.splitlines()[0]
    return line if len(line) <= 300 else line[:299] + "…"
