"""`--mlflow` against a tracking server that fails, and what logging leaves out of the measurement:
a real HTTP server on loopback answering 500 is refused before measuring after two tries (MLflow's
own settings make eight, over minutes); one that fails after the run costs two tries as well, and
the run stays recorded; a user's own retry setting is kept; and the measured process imports
mlflow only after its peak RSS is taken."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from flowrate.results.store import Store

TINY = ("run", "-p", "fc_mnist", "--size", "debug", "--preheat", "1", "--steps", "2", "--quiet")
LOOKUP = "/api/2.0/mlflow/experiments/get-by-name"
EXPERIMENT = {
    "experiment": {
        "experiment_id": "1",
        "name": "flowrate",
        "artifact_location": "mlflow-artifacts:/1",
        "lifecycle_stage": "active",
        "last_update_time": 0,
        "creation_time": 0,
        "tags": [],
    }
}


class FailingServer(ThreadingHTTPServer):
    """Answers 500 to every request but the experiment's lookup while ``lookup_works``; counts
    the requests it failed."""

    daemon_threads = True

    def __init__(self, lookup_works: bool) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lookup_works = lookup_works
        self.failed: list[str] = []

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: FailingServer

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if self.server.lookup_works and self.path.startswith(LOOKUP):
            body, status = json.dumps(EXPERIMENT).encode(), 200
        else:
            self.server.failed.append(self.path.split("?")[0])
            body, status = b'{"error_code": "INTERNAL_ERROR", "message": "down for maintenance"}', 500
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the test reads the requests from ``failed``."""


def _serve(lookup_works: bool) -> Iterator[FailingServer]:
    server = FailingServer(lookup_works)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def down() -> Iterator[FailingServer]:
    yield from _serve(lookup_works=False)


@pytest.fixture
def fails_after_check() -> Iterator[FailingServer]:
    yield from _serve(lookup_works=True)


@pytest.fixture(autouse=True)
def mlflow_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow's own HTTP settings, whatever the environment running the tests has set."""
    for name in ("MAX_RETRIES", "BACKOFF_FACTOR", "BACKOFF_JITTER", "TIMEOUT"):
        monkeypatch.delenv(f"MLFLOW_HTTP_REQUEST_{name}", raising=False)


def test_a_server_answering_500_is_refused_before_measuring_after_two_tries(
    run_cli, down: FailingServer, results_store: Path
) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli(*TINY, "--mlflow", down.uri)
    [line] = outcome.stderr.strip().splitlines()
    assert outcome.code == 2 and line.startswith(f"error: --mlflow: cannot use tracking store {down.uri}: ")
    assert down.failed == [LOOKUP, LOOKUP]  # one try and one retry, not MLflow's eight
    with Store(results_store) as store:
        assert store.runs() == []


def test_a_users_own_retry_setting_is_kept(
    run_cli, down: FailingServer, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "0")
    outcome = run_cli(*TINY, "--mlflow", down.uri)
    assert outcome.code == 2 and down.failed == [LOOKUP] * 3


def test_a_server_failing_after_the_run_is_one_line_and_the_run_stays_recorded(
    run_cli, fails_after_check: FailingServer, results_store: Path
) -> None:  # type: ignore[no-untyped-def]
    uri = fails_after_check.uri
    outcome = run_cli(*TINY, "--mlflow", uri)
    [line] = [text for text in outcome.stderr.splitlines() if text.startswith("error:")]
    with Store(results_store) as store:
        [recorded] = store.runs()
    run_id = recorded.run_id
    assert outcome.code == 1 and line.startswith(f"error: MLflow logging to {uri} failed: ")
    assert line.endswith(
        f"the run is recorded as {run_id}: send it with `flowrate export --mlflow {uri} {run_id}`"
    )
    assert len(fails_after_check.failed) == 2  # the first request after the run, tried twice


# Runs `flowrate run --mlflow URI` in this interpreter, noting at each read of the run's memory
# peaks whether mlflow is imported, and prints those notes and whether it is at the end.
_SPY = """
import json, sys
import flowrate.harness.run as harness
from flowrate.cli.main import main

seen = []
read_peaks = harness.read_peaks

def spy(*args, **kwargs):
    seen.append("mlflow" in sys.modules)
    return read_peaks(*args, **kwargs)

harness.read_peaks = spy
try:
    main(sys.argv[1:])
except SystemExit as done:
    code = done.code
print(json.dumps({"code": code, "at_peaks": seen, "at_end": "mlflow" in sys.modules}))
"""


def test_the_measured_process_imports_mlflow_only_after_its_peaks_are_read(
    tmp_path: Path, results_store: Path
) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    done = subprocess.run(
        [sys.executable, "-c", _SPY, *TINY, "--mlflow", uri],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["code"] in (0, None), done.stderr
    assert said["at_peaks"] and not any(said["at_peaks"])  # the peak RSS holds no mlflow
    assert said["at_end"]  # and the run was logged from this process, after them
