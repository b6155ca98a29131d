"""`flowrate run --mlflow` and `flowrate export --mlflow` end to end, read back from a real local
MLflow tracking store with MLflow's client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from factories import make_result
from flowrate.results.mlflow_log import ARTIFACT, RUN_ID_TAG
from flowrate.results.store import Store

TINY = ("-p", "fc_mnist", "--size", "debug", "--preheat", "1", "--duration", "0.5", "--quiet")


@pytest.fixture(scope="module")
def tracking_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The session's one store, shared with tests/unit/test_mlflow_log.py (a new store builds its
    tables for a second or more); each test logs into an experiment of its own."""
    folder = tmp_path_factory.getbasetemp() / "mlflow"
    folder.mkdir(exist_ok=True)
    return f"sqlite:///{folder / 'mlflow.db'}"


def _runs(uri: str, experiment: str) -> list[Any]:
    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    return (
        [] if found is None else client.search_runs([found.experiment_id], order_by=["attributes.start_time"])
    )


def test_a_run_is_logged_after_it_is_recorded(
    run_cli, tracking_uri: str, results_store: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("run", *TINY, "--json", "--mlflow", tracking_uri, "--mlflow-experiment", "e2e")
    assert outcome.code == 0, outcome.stderr
    printed = outcome.json()
    [run] = _runs(tracking_uri, "e2e")
    assert run.data.tags[RUN_ID_TAG] == printed["run_id"] and run.info.status == "FINISHED"
    assert run.data.params["problem"] == "fc_mnist" and run.data.params["size"] == "debug"
    assert run.data.metrics["samples_per_sec"] == printed["summary"]["samples_per_sec"]
    client = MlflowClient(tracking_uri)
    history = client.get_metric_history(run.info.run_id, "interval/global_samples_per_sec")
    expected = [
        (i["index"], i["global_samples_per_sec"]) for i in printed["intervals"] if i["kind"] == "compute"
    ]
    assert [(m.step, m.value) for m in history] == expected and len(expected) >= 2
    artifact = client.download_artifacts(run.info.run_id, ARTIFACT, str(tmp_path))
    assert json.loads(Path(artifact).read_text()) == printed
    with Store(results_store, create=False) as store:
        [recorded] = store.runs()
    assert recorded.run_id == printed["run_id"]  # recorded in flowrate's store as well


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--mlflow", "nosuch://host/x"), "--mlflow: cannot use tracking store nosuch://host/x: "),
        (("--mlflow-experiment", "e"), "--mlflow-experiment: needs --mlflow [URI]"),
    ],
)
def test_a_bad_store_is_refused_before_measuring(
    run_cli, results_store: Path, args: tuple[str, ...], says: str
) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("run", *TINY, *args)
    [line] = outcome.stderr.strip().splitlines()
    assert outcome.code == 2 and line.startswith(f"error: {says}")
    with Store(results_store) as store:
        assert store.runs() == []  # refused before anything was measured


def test_export_sends_recorded_runs_once(run_cli, tracking_uri: str, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    first, second, third = (make_result(run_id=f"{n:012x}") for n in (0xA1, 0xA2, 0xA3))
    with Store(results_store) as store:
        store.add(first, ["nightly"])
        store.add(second, [])
    sent = run_cli("export", "--mlflow", tracking_uri, "--mlflow-experiment", "export")
    assert sent.code == 0, sent.stderr
    assert f"2 runs sent to MLflow experiment export in {tracking_uri}" in sent.stderr
    again = run_cli("export", "--mlflow", tracking_uri, "--mlflow-experiment", "export")
    assert again.code == 0 and "0 runs sent" in again.stderr and "2 runs already there" in again.stderr
    with Store(results_store) as store:
        store.add(third, [])
    one = run_cli("export", "--mlflow", tracking_uri, "--mlflow-experiment", "export", third.run_id)
    assert one.code == 0 and "1 run sent" in one.stderr
    runs = _runs(tracking_uri, "export")
    assert sorted(r.data.tags[RUN_ID_TAG] for r in runs) == [first.run_id, second.run_id, third.run_id]
    [tagged] = [r for r in runs if r.data.tags[RUN_ID_TAG] == first.run_id]
    assert tagged.data.tags["flowrate.tags"] == "nightly"
    artifact = MlflowClient(tracking_uri).download_artifacts(tagged.info.run_id, ARTIFACT)
    assert json.loads(Path(artifact).read_text()) == first.to_dict()


def test_export_refuses_a_run_id_taken_for_the_uri_and_a_file_with_mlflow(
    run_cli, results_store: Path
) -> None:  # type: ignore[no-untyped-def]
    with Store(results_store) as store:
        store.add(make_result(run_id="abcabcabcabc"), [])
    taken = run_cli("export", "--mlflow", "abcabcabcabc")
    assert taken.code == 2 and len(taken.stderr.strip().splitlines()) == 1
    assert "'abcabcabcabc' is not a tracking URI" in taken.stderr and "--mlflow last" in taken.stderr
    both = run_cli("export", "--mlflow", "sqlite:///x.db", "--out", "runs.jsonl")
    assert both.code == 2 and "--out and --format write a file: one or the other" in both.stderr


def test_a_sweep_sends_its_recorded_points(run_cli, tracking_uri: str) -> None:  # type: ignore[no-untyped-def]
    args = (
        "sweep",
        "-p",
        "fc_mnist",
        "--size",
        "debug",
        "--preheat",
        "1",
        "--steps",
        "2",
        "-g",
        "batch_size=2",
    )
    outcome = run_cli(*args, "--name", "tiny", "--mlflow", tracking_uri, "--mlflow-experiment", "sweep")
    assert outcome.code == 0, outcome.stderr
    assert f"1 run sent to MLflow experiment sweep in {tracking_uri}" in outcome.stderr
    [run] = _runs(tracking_uri, "sweep")
    assert run.data.tags["flowrate.tags"] == "sweep:tiny" and run.data.params["batch_size"] == "2"
