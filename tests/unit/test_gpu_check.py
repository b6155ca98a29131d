"""benchmarks/gpu_check.py on a CPU: every step runs in its box whatever the one before it did, its
output folder is substituted into its command, and the JSON holds each step's exit code."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmark_scripts import load_benchmark


def test_the_default_run_leaves_the_profiles_out() -> None:
    check = load_benchmark("gpu_check")
    assert check.DEFAULT_STEPS == ["survey", "tests", "kernels", "streaming"]
    assert {"profile-eager", "profile-compile", "compile-padded"} <= set(check.STEPS)
    # the default steps fit in 8 minutes with room for the interpreters' start-up
    assert sum(check.STEPS[name][1] for name in check.DEFAULT_STEPS) <= 8 * 60 - 30


def test_a_failing_step_does_not_stop_the_next_and_out_reaches_its_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    check = load_benchmark("gpu_check")
    write = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text('made')"
    monkeypatch.setattr(
        check,
        "STEPS",
        {
            "fails": ([sys.executable, "-c", "raise SystemExit(3)"], 30),
            "writes": ([sys.executable, "-c", write, "{out}/made.txt"], 30),
        },
    )
    monkeypatch.setattr(check, "PROBE", "print('no device here')")
    monkeypatch.setattr(check, "_record", lambda steps, out, site: None)
    monkeypatch.setattr(sys, "argv", ["gpu_check.py", "--steps", "fails", "writes", "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as ended:
        check.main()
    assert ended.value.code == 1  # a step failed
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert {name: step["exit_code"] for name, step in report["steps"].items()} == {"fails": 3, "writes": 0}
    assert (tmp_path / "made.txt").read_text() == "made"
    assert str(tmp_path / "made.txt") in report["steps"]["writes"]["command"]
