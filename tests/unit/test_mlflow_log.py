"""MLflow logging against a real local tracking store (SQLite), read back with MLflow's client."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from factories import make_result
from flowrate.errors import ConfigError, FlowrateError, RunFailed
from flowrate.results.mlflow_log import ARTIFACT, RUN_ID_TAG, MlflowLog, interval_values, params
from flowrate.results.schema import Result
from flowrate.results.store import StoredRun

COMMIT = "b431653a9768707927945a65df8a2287bb8492e7"


@pytest.fixture(scope="module")
def tracking_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The session's one store, shared with tests/integration/test_cli_mlflow.py (a new store builds
    its tables for a second or more); each test logs into an experiment of its own."""
    folder = tmp_path_factory.getbasetemp() / "mlflow"
    folder.mkdir(exist_ok=True)
    return f"sqlite:///{folder / 'mlflow.db'}"


@pytest.fixture
def log(tracking_uri: str, request: pytest.FixtureRequest) -> MlflowLog:
    """An experiment of this test's own in the shared store."""
    return MlflowLog.open(tracking_uri, request.node.name)


def _result(**options: Any) -> Result:
    environment = {"flowrate": {"version": "0.1.0", "commit": COMMIT, "dirty": False}, "hostname": "box"}
    return make_result(environment=environment, **options)


def _ms(iso: str) -> int:
    import datetime as dt

    return round(dt.datetime.fromisoformat(iso).timestamp() * 1000)


def test_a_run_reads_back_whole(log: MlflowLog, tracking_uri: str, tmp_path: Path) -> None:
    result = _result(checkpoint_after=[1], mfu=0.25)
    mlflow_id = log.send(result, ["nightly", "cpu"])
    assert mlflow_id is not None
    client = MlflowClient(tracking_uri)
    run = client.get_run(mlflow_id)
    assert run.info.status == "FINISHED" and run.info.end_time == _ms(result.created_at)

    assert run.data.params["problem"] == "fc_mnist" and run.data.params["batch_size"] == "8"
    assert run.data.params["result.batch_size"] == "8" and run.data.params["precision"] == "fp32"
    assert run.data.metrics["samples_per_sec"] == result.summary.samples_per_sec
    assert run.data.metrics["timed_steps"] == result.summary.timed_steps
    assert run.data.metrics["flops/mfu"] == 0.25 and run.data.metrics["problem/parameters"] == 26506

    compute = [i for i in result.intervals if i.kind == "compute"]
    [checkpoint] = [i for i in result.intervals if i.kind == "checkpoint"]
    for key in ("rate_samples_per_sec", "global_samples_per_sec", "loss"):
        history = client.get_metric_history(mlflow_id, f"interval/{key}")
        assert [(m.step, m.value) for m in history] == [(i.index, getattr(i, key)) for i in compute]
    [saved] = client.get_metric_history(mlflow_id, "interval/checkpoint_s")
    assert (saved.step, saved.value) == (checkpoint.index, checkpoint.seconds)
    last = client.get_metric_history(mlflow_id, "interval/global_samples_per_sec")[-1]
    duration = result.summary.timed_duration_s
    assert last.timestamp == _ms(result.created_at) - round((duration - compute[-1].elapsed_s) * 1000)

    tags = run.data.tags
    assert tags[RUN_ID_TAG] == result.run_id and tags["flowrate.version"] == "0.1.0"
    assert tags["flowrate.problem"] == "fc_mnist" and tags["flowrate.tags"] == "nightly, cpu"
    assert tags["mlflow.source.git.commit"] == COMMIT and tags["flowrate.machine.hostname"] == "box"
    assert tags["flowrate.machine.device_name"] == "Test CPU"
    artifact = client.download_artifacts(mlflow_id, ARTIFACT, str(tmp_path))
    assert json.loads(Path(artifact).read_text()) == result.to_dict()


def test_sending_a_run_again_adds_nothing(log: MlflowLog, tracking_uri: str) -> None:
    result = _result()
    first = log.send(result)
    assert first is not None and log.send(result) is None
    assert log.send_all([StoredRun.from_result(result, ())]) == 0  # how many it sent
    assert log.logged(result.run_id) == first
    runs = MlflowClient(tracking_uri).search_runs([log.experiment_id])
    assert [r.info.run_id for r in runs] == [first]
    # what `flowrate run --mlflow` says of each: the run it made, then that nothing was sent
    from flowrate.cli.mlflow_option import logged_line

    where = f"MLflow experiment {log.experiment}"
    assert logged_line(log, first) == f"logged to {where} as run {first} in {log.uri}"
    assert logged_line(log, None) == f"already in {where} in {log.uri}: not sent again"


def test_a_long_run_is_sent_in_batches_within_mlflow_limits(log: MlflowLog, tracking_uri: str) -> None:
    result = _result(interval_rates=[1000.0 + i for i in range(1500)])
    mlflow_id = log.send(result)
    assert mlflow_id is not None
    history = MlflowClient(tracking_uri).get_metric_history(mlflow_id, "interval/rate_samples_per_sec")
    assert [m.step for m in history] == list(range(1500))
    assert [m.value for m in history] == [i.rate_samples_per_sec for i in result.intervals]


def test_params_keep_mlflow_limits_on_names_and_values(log: MlflowLog, tracking_uri: str) -> None:
    long = "x" * 7000
    made = _result()
    options = {"odd key!": long, "m": 64}
    result = dataclasses.replace(made, config=dataclasses.replace(made.config, problem_options=options))
    flat = params(result)
    assert flat["problem_options.m"] == "64" and flat["problem_options.odd key_"] == "x" * 5999 + "…"
    mlflow_id = log.send(result)
    assert mlflow_id is not None
    assert MlflowClient(tracking_uri).get_run(mlflow_id).data.params == flat


def test_a_checkpoint_interval_logs_its_seconds_only() -> None:
    result = _result(checkpoint_after=[0])
    checkpoint = result.intervals[1]
    assert interval_values(checkpoint) == {"checkpoint_s": checkpoint.seconds}
    assert set(interval_values(result.intervals[0])) == {
        "rate_samples_per_sec",
        "global_samples_per_sec",
        "samples_per_sec",
        "loss",
        "model_flops_per_sec",
    }


def test_a_store_that_fails_after_opening_is_one_line_and_leaves_no_half_run(
    log: MlflowLog, tracking_uri: str
) -> None:
    client = MlflowClient(tracking_uri)
    client.delete_experiment(log.experiment_id)
    with pytest.raises(RunFailed, match=r"^MLflow logging to sqlite:///.* failed: ") as failed:
        log.send_all([StoredRun.from_result(_result(run_id="eeee00000001"), ())])
    assert "\n" not in str(failed.value)
    assert str(failed.value).endswith(" (at run eeee00000001; 0 runs sent before it)")


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("abc123def456", "'abc123def456' is not a tracking URI"),
        ("nosuch://host/x", "cannot use tracking store nosuch://host/x: "),
        ("sqlite:////proc/no/such/folder/mlflow.db", "cannot use tracking store sqlite:////proc/no/"),
    ],
)
def test_a_store_that_cannot_be_used_is_refused_in_one_line(uri: str, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        MlflowLog.open(uri, "flowrate")
    assert refused.value.field == "mlflow" and says in refused.value.message
    assert "\n" not in str(refused.value)


def test_a_deleted_experiment_is_refused(tracking_uri: str) -> None:
    client = MlflowClient(tracking_uri)
    client.delete_experiment(client.create_experiment("gone"))
    with pytest.raises(ConfigError, match="'gone' is deleted") as refused:
        MlflowLog.open(tracking_uri, "gone")
    assert refused.value.field == "mlflow_experiment"


def test_without_mlflow_installed_it_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)
    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)
    with pytest.raises(FlowrateError, match=r"pip install -e '\.\[mlflow\]'"):
        MlflowLog.open("sqlite:///unused.db")


def test_runs_and_help_do_not_import_mlflow() -> None:
    """mlflow loads only when a store is opened: `flowrate run --help` and plain runs never wait for it."""
    code = (
        "import sys\n"
        "import flowrate.harness.api, flowrate.results.mlflow_log, flowrate.cli.export\n"
        "from flowrate.cli.main import main\n"
        "try:\n"
        "    main(['run', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('mlflow' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "False"
    assert "--mlflow [URI]" in done.stdout


def test_a_failed_log_after_the_run_says_how_to_send_it_again(log: MlflowLog, tracking_uri: str) -> None:
    from flowrate.campaigns.recorded_run import send_run

    MlflowClient(tracking_uri).delete_experiment(log.experiment_id)
    result = _result()
    with pytest.raises(RunFailed) as failed:
        send_run(log, result, (), recorded=True)
    assert str(failed.value).endswith(
        f"; the run is recorded as {result.run_id}: send it with "
        f"`flowrate export --mlflow {tracking_uri} {result.run_id}`"
    )


@pytest.mark.parametrize(("asked", "logged"), [(None, "16"), (32, "32"), ("auto", "auto")])
def test_the_batch_size_param_is_the_runs_batch_when_the_default_was_used(asked: Any, logged: str) -> None:
    made = make_result(batch_size=16)
    result = dataclasses.replace(made, config=dataclasses.replace(made.config, batch_size=asked))
    flat = params(result)
    assert flat["batch_size"] == logged and flat["result.batch_size"] == "16"
