"""Shared test helpers: run the CLI in-process and capture what a user would see."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from benchmark_scripts import BENCHMARKS
from flowrate.cli.main import main

# The modules benchmarks/ scripts share (estimate_published's cases, explore_table's replay) are
# imported by the tests as the scripts import them; last on the path, so nothing else is shadowed.
sys.path.append(str(BENCHMARKS))


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C reaches the processes the tests interrupt. A pytest started as a background job
    without job control (`cmd &` in a script) inherits SIGINT ignored, and so would every process
    it starts, so the interrupt tests would see a run that never stopped; with a handler here, a
    child starts with SIGINT at its default, as under a terminal."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@dataclass
class CliOutcome:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


@pytest.fixture(autouse=True)
def results_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Every test records into a store of its own (never ./flowrate.db); spawned children inherit it."""
    path = tmp_path_factory.mktemp("store") / "flowrate.db"
    monkeypatch.setenv("FLOWRATE_STORE", str(path))
    return path


@pytest.fixture(autouse=True)
def estimate_caches(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the user's calibration or compile cache (~/.cache/flowrate)."""
    folder = tmp_path_factory.mktemp("flowrate-cache")
    monkeypatch.setenv("FLOWRATE_CALIBRATION", str(folder / "calibration.json"))
    monkeypatch.setenv("FLOWRATE_CACHE", str(folder))


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """Call `flowrate ARGS…` in this process; return its exit code, stdout and stderr."""

    def call(*args: str) -> CliOutcome:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as done:
            code = int(done.code or 0)
        captured = capsys.readouterr()
        return CliOutcome(code, captured.out, captured.err)

    return call


# Small, fast settings for end-to-end runs.
FAST = ("--preheat", "1", "--steps", "4")


_KEPT_BEFORE = pytest.StashKey[bool]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    from flowrate.measure.freed_memory import _Process

    item.stash[_KEPT_BEFORE] = _Process.kept


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """No test leaves the test process keeping freed host memory: keeping cannot be undone, and
    every later in-process run would be measured kept and warned about. A test that keeps does so
    in a fresh interpreter (test_freed_memory, test_cli_run) or patches apply (calibrate's tests).
    Checked once every fixture, monkeypatch included, is torn down."""
    from flowrate.measure.freed_memory import _Process

    yield
    kept_before = item.stash.get(_KEPT_BEFORE, False)
    assert kept_before or not _Process.kept, "this test set the test process to keep freed host memory"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """GPU tests need CUDA: skip them, saying why, where there is none (CI); run them where there is."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device: run `pytest -m gpu` on a machine with a GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
