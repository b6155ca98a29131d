"""One session per exploration: a second session of a study is refused while another process
holds it, in one line and exit 2; other studies run beside it; a killed holder blocks nothing."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from flowrate.campaigns.explore.session import exclusive_session
from flowrate.errors import EXIT_BAD_INPUT, FlowrateError
from flowrate.results.store import Store
from flowrate.results.store_filter import RunFilter

_HOLD = """
import sys, time
from pathlib import Path
from flowrate.campaigns.explore.session import exclusive_session
with exclusive_session(Path(sys.argv[1]), sys.argv[2]):
    print("held", flush=True)
    time.sleep(600)
"""


@contextmanager
def held_elsewhere(store: Path, study: str) -> Iterator[subprocess.Popen[str]]:
    """A process of its own holding ``study``'s session on ``store`` until the block ends (killed)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(store), study], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def test_a_study_held_by_another_process_is_refused_and_others_run_beside_it(tmp_path: Path) -> None:
    store = tmp_path / "flowrate.db"
    with held_elsewhere(store, "study-a"):
        refusal = pytest.raises(FlowrateError, match="study-a is running in another session")
        with refusal as refused, exclusive_session(store, "study-a"):
            pass
        assert refused.value.exit_code == EXIT_BAD_INPUT
        with exclusive_session(store, "study-b") as storage:  # another study of the same store
            assert storage.get_all_studies() == []
    with exclusive_session(store, "study-a"):  # its holder was killed: the lock went with it
        pass


def test_explore_refuses_a_second_session_in_one_line_before_any_run(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    args = ("-p", "fc_mnist", "--size", "debug", "--device", "cpu", "--steps", "2", "--preheat", "1")
    with held_elsewhere(results_store, "busy"):
        outcome = run_cli("explore", *args, "--space", "batch_size=1,2", "--name", "busy")
    assert outcome.code == 2, outcome.stderr
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1 and "busy is running in another session" in lines[0], outcome.stderr
    with Store(results_store) as store:
        assert store.runs(RunFilter(tag="explore:busy")) == []


def test_a_session_checks_its_budget_before_it_opens_the_store_or_an_executor(tmp_path: Path) -> None:
    from flowrate.campaigns.explore.objectives import parse_objectives
    from flowrate.campaigns.explore.plan import Budget, ExploreSpec
    from flowrate.campaigns.explore.run import run_session
    from flowrate.campaigns.explore.space import merge_space, parse_space_flags
    from flowrate.errors import ConfigError

    space = merge_space(parse_space_flags(["batch_size=2..8"]), {"problem": "fc_mnist", "size": "debug"})
    spec = ExploreSpec(space, parse_objectives(["samples_per_sec:max"]))
    opened: list[str] = []
    store = tmp_path / "s.db"
    with pytest.raises(ConfigError, match=r"2 runs is less than the initial design \(3\)"):
        run_session(spec, str(store), opened.append, budget=Budget.parse("2"), initial=3)  # type: ignore[arg-type]
    assert opened == [] and not store.exists() and not (tmp_path / "s.explore.lock").exists()
