"""serve-bench interrupted before any request completed: exit 130, and the run recorded as partial
with every request's trace (the server in tests/fault_server.py holds each stream open)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import fault_server
from flowrate.results.schema import Result


def test_ctrl_c_before_the_first_completion_records_a_partial_run(tmp_path: Path) -> None:
    fault_server.start()
    held_before = fault_server.server().held  # other tests in this process may have held some
    out = tmp_path / "partial.json"
    args = ["serve-bench", "--url", fault_server.url("slow"), "--model", "m", "-n", "3", "--rate", "inf"]
    cli = subprocess.Popen(
        [sys.executable, "-m", "flowrate", *args, "--no-store", "--out", str(out)],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert cli.stderr is not None and cli.stderr.readline().startswith("serve-bench: 3 requests")
    deadline = time.monotonic() + 60
    while fault_server.server().held < held_before + 3 and time.monotonic() < deadline:
        time.sleep(0.05)  # until the load's streams are open and held
    cli.send_signal(signal.SIGINT)
    _, stderr = cli.communicate(timeout=60)
    assert cli.returncode == 130, stderr
    assert "Traceback" not in stderr and "error: interrupted" in stderr
    serving = Result.load(out).serving
    assert serving is not None and serving.partial and serving.requests == 3
    assert serving.figures().completed == 0
    assert [t.error for t in serving.traces] == ["interrupted"] * 3
