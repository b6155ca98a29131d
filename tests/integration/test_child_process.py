"""A run's fresh process: forked from the fork server (torch imported once) while the start-up
environment is the server's, spawned otherwise; either way it runs with the caller's
environment as it is when the run starts."""

import multiprocessing
from dataclasses import replace
from pathlib import Path

import pytest

from flowrate.campaigns.process import child
from flowrate.campaigns.process.child import ERROR, process_context, run_in_fresh_process
from flowrate.config import RunConfig

TINY = RunConfig(problem="fc_mnist", size="debug", device="cpu", preheat_steps=1, steps=2, sample_every=1)
needs_forkserver = pytest.mark.skipif(
    "forkserver" not in multiprocessing.get_all_start_methods(), reason="no forkserver on this platform"
)


@needs_forkserver
def test_the_fork_server_serves_while_only_flowrates_variables_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(child._Server, "environment", None)
    assert process_context().get_start_method() == "forkserver"
    monkeypatch.setenv("FLOWRATE_STORE", "elsewhere.db")  # read by flowrate in the child, after start
    assert process_context().get_start_method() == "forkserver"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # read as the libraries load: the server's is stale
    assert process_context().get_start_method() == "spawn"
    assert process_context("forkserver").get_start_method() == "forkserver"  # asked for: served
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert process_context().get_start_method() == "forkserver"
    assert process_context("spawn").get_start_method() == "spawn"


@pytest.mark.parametrize("method", ["spawn", pytest.param("forkserver", marks=needs_forkserver)])
def test_the_child_runs_with_the_callers_environment_as_the_run_starts(
    method: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = run_in_fresh_process(TINY, start_method=method)  # starts the server, if it is not yet
    assert first.result is not None and first.result.summary.timed_steps == 2
    peaks = tmp_path / "peaks.json"
    peaks.write_bytes(b"\xff\xfe\x00")
    monkeypatch.setenv("FLOWRATE_PEAKS", str(peaks))  # set after the server started: the child reads it
    second = run_in_fresh_process(TINY, start_method=method)
    assert second.failure == ERROR
    assert "FLOWRATE_PEAKS" in second.message and "not UTF-8" in second.message


def test_ctrl_c_while_the_fork_server_imports_torch_is_left_to_the_caller() -> None:
    """Ctrl-C reaches the whole process group, the fork server too, often while it still imports
    torch: the preload ignores it (the caller ends its children), so no import traceback."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = (
        "import flowrate.campaigns; print('ready', flush=True); "
        "import flowrate.campaigns.process.fork_preload; print('imported', flush=True); "
        "import sys, torch; print(('flowrate.harness.api' in sys.modules) == (torch.version.cuda is None))"
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    assert process.stdout.readline() == b"ready\n"
    time.sleep(0.2)  # inside `import torch`, which takes a second or more
    while process.poll() is None:
        os.kill(process.pid, signal.SIGINT)
        time.sleep(0.1)
    out, err = process.communicate()
    assert process.returncode == 0, err.decode()
    # and on a CPU build it imported the run harness, which a forked run then need not import
    assert out == b"imported\nTrue\n" and b"Traceback" not in err


@pytest.mark.parametrize("method", ["spawn", pytest.param("forkserver", marks=needs_forkserver)])
def test_a_runs_process_takes_ctrl_c_as_python_does(method: str, tmp_path: Path) -> None:
    """The fork server ignores SIGINT; the run's process it forks sets Python's handler back."""
    factory = tmp_path / "probe.py"
    factory.write_text(
        "import signal\n"
        "from flowrate import get_problem\n"
        "def make():\n"
        "    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:\n"
        "        raise ValueError('Ctrl-C is not handled in the run')\n"
        "    return get_problem('fc_mnist', size='debug')\n"
    )
    outcome = run_in_fresh_process(replace(TINY, problem=f"{factory}:make", size=None), start_method=method)
    assert outcome.failure is None, outcome.message
