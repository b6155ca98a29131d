"""A store another process holds locked: flowrate says what it waits for, goes on once the lock is
gone, and Ctrl-C stops the wait at once (exit 130, one line, nothing written).

The lock is this test's own connection in `BEGIN IMMEDIATE`, as a process recording a run holds
it; flowrate runs as a real process, so Ctrl-C is a real SIGINT.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile.checks import error_lines, store_run_ids

from factories import make_result
from flowrate.results.store import Store

RUN_A, RUN_NEW = "aaaa00000001", "cccc00000003"
WAITING = "waiting for the results store"
# Far beyond the wait's own start-up and notice, far below its 60 s limit: a wait that Ctrl-C
# cannot stop runs into it.
PATIENCE_S = 30.0


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "flowrate.db"
    with Store(path) as opened:
        opened.add(make_result(run_id=RUN_A))
    return path


@pytest.fixture
def result(tmp_path: Path) -> Path:
    path = tmp_path / "result.json"
    path.write_text(make_result(run_id=RUN_NEW).to_json())
    return path


@pytest.fixture
def held(store: Path) -> Iterator[sqlite3.Connection]:
    """The store's write lock, held by another connection until the test lets it go."""
    db = sqlite3.connect(store, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    yield db
    if db.in_transaction:
        db.execute("ROLLBACK")
    db.close()


class Flowrate:
    """`python -m flowrate ARGV` in its own process group, its stderr collected as it comes."""

    def __init__(self, *argv: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "flowrate", *argv], stderr=subprocess.PIPE, start_new_session=True
        )
        self.chunks: list[bytes] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for chunk in iter(lambda: self.process.stderr.read1(65536), b""):  # type: ignore[union-attr]
            self.chunks.append(chunk)

    @property
    def stderr(self) -> str:
        return b"".join(self.chunks).decode(errors="replace")

    def wait_for(self, text: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in self.stderr:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.finish(5.0)
                pytest.fail(f"no {text!r} on stderr; it ended with {self.process.returncode}:\n{self.stderr}")
            time.sleep(0.05)

    def finish(self, timeout_s: float) -> int:
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            pytest.fail(f"still running {timeout_s:g} s later (killed):\n{self.stderr}")
        self.reader.join(timeout=10)
        return code


def test_ctrl_c_while_waiting_for_a_locked_store_exits_130_at_once_and_writes_nothing(
    store: Path, result: Path, held: sqlite3.Connection
) -> None:
    command = Flowrate("import", str(result), "--store", str(store))
    command.wait_for(WAITING, 120.0)
    time.sleep(0.3)  # the line is out; Ctrl-C comes during the wait itself
    os.killpg(command.process.pid, signal.SIGINT)
    code = command.finish(PATIENCE_S)  # while the lock is still held: the wait did not time out
    stderr = command.stderr
    assert code == 130, stderr
    assert error_lines(stderr) == ["error: interrupted"], stderr
    assert [line for line in stderr.splitlines() if WAITING in line] == [
        f"warning: {WAITING} {store}: another process is writing to it (for up to 60 s; Ctrl-C stops)"
    ]
    assert "Traceback" not in stderr
    held.execute("ROLLBACK")
    assert store_run_ids(store) == {RUN_A}


def test_a_command_waiting_for_a_locked_store_goes_on_once_the_lock_is_gone(
    store: Path, result: Path, held: sqlite3.Connection
) -> None:
    command = Flowrate("import", str(result), "--store", str(store))
    command.wait_for(WAITING, 120.0)
    held.execute("ROLLBACK")
    code = command.finish(PATIENCE_S)
    assert code == 0, command.stderr
    assert error_lines(command.stderr) == []
    with Store(store, create=False) as opened:
        assert {run.run_id for run in opened.runs()} == {RUN_A, RUN_NEW}
