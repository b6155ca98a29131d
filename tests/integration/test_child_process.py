"""A run's fresh process: forked from the fork server (torch imported once) while the start-up
environment is the server's, spawned otherwise; either way it runs with the caller's
environment as it is when the run starts."""

import itertools
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


def _logged_problem(folder: Path) -> str:
    """A problem file whose fc_mnist writes its process id at each step's loss, to one log."""
    factory = folder / "logged.py"
    factory.write_text(
        "import os\n"
        "from flowrate import get_problem\n"
        f"LOG = {str(folder / 'steps.log')!r}\n"
        "def make():\n"
        "    problem = get_problem('fc_mnist', size='debug')\n"
        "    loss = problem.loss\n"
        "    def logged(model, batch):\n"
        "        with open(LOG, 'a') as log:\n"
        "            log.write(f'{os.getpid()}\\n')\n"
        "        return loss(model, batch)\n"
        "    problem.loss = logged\n"
        "    return problem\n"
    )
    return f"{factory}:make"


def test_two_runs_taking_turns_work_one_at_a_time_interval_by_interval(tmp_path: Path) -> None:
    config = replace(TINY, problem=_logged_problem(tmp_path), size=None, steps=20, sample_every=5)
    first, second = child.run_in_turns(config, config, argv=(["a"], ["b"]))
    assert first.result is not None and second.result is not None, (first.message, second.message)
    # both lived at once
    assert first.child_started is not None and second.child_started is not None
    assert first.child_started < (second.child_finished or 0)
    assert second.child_started < (first.child_finished or 0)
    steps = (tmp_path / "steps.log").read_text().split()
    runs = [len(list(group)) for _, group in itertools.groupby(steps)]
    # the first turn of each holds its start-up steps and its first interval; then 5 steps a turn,
    # the partners alternating, until both have timed 20
    assert runs[0] == runs[1] > 5 and runs[2:] == [5] * 6
    assert steps[0] != steps[runs[0]]
    # neither run's clock counted the other's turns, and neither metered the other's energy
    for outcome in (first, second):
        assert outcome.result is not None
        assert outcome.result.summary.timed_steps == 20
        assert "taking turns" in (outcome.result.energy.reason or "")


@pytest.mark.parametrize("failing", [0, 1])
def test_a_partner_that_fails_leaves_the_other_to_run_alone(tmp_path: Path, failing: int) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("def make():\n    raise ValueError('this problem does not build')\n")
    configs = [TINY, TINY]
    configs[failing] = replace(TINY, problem=f"{broken}:make", size=None)
    outcomes = child.run_in_turns(configs[0], configs[1], argv=(["a"], ["b"]))
    assert outcomes[failing].failure == ERROR and "does not build" in outcomes[failing].message
    survivor = outcomes[1 - failing].result
    assert survivor is not None and survivor.summary.timed_steps == 2


def test_a_partner_that_dies_holding_its_turn_leaves_the_other_to_run_alone(tmp_path: Path) -> None:
    dying = tmp_path / "dying.py"
    dying.write_text(
        "import os\n"
        "from flowrate import get_problem\n"
        "def make():\n"
        "    problem = get_problem('fc_mnist', size='debug')\n"
        "    loss = problem.loss\n"
        "    def dies(model, batch):\n"
        "        os._exit(3)  # killed mid-step, its turn never handed over\n"
        "    problem.loss = dies\n"
        "    return problem\n"
    )
    first, second = child.run_in_turns(
        replace(TINY, problem=f"{dying}:make", size=None), TINY, argv=(["a"], ["b"])
    )
    assert first.failure == child.CRASHED
    assert second.result is not None and second.result.summary.timed_steps == 2
