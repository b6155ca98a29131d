"""The README's examples and examples/ run exactly as a user would run them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
BIN = Path(sys.executable).parent


def block_after(marker: str) -> str:
    match = re.search(re.escape(marker) + r"\s*```\w*\n(.*?)```", README, re.S)
    assert match, f"README has no code block after {marker!r}"
    return match.group(1)


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done


def flop_warnings(text: str) -> list[str]:
    """The warnings that say a problem's declared FLOPs disagree with what PyTorch executed."""
    return [line for line in text.splitlines() if "warning" in line and "FLOP" in line]


def test_readme_user_problem_from_cli_and_python(tmp_path: Path) -> None:
    (tmp_path / "my_model.py").write_text(block_after("<!-- example-file: my_model.py -->"))
    shell = block_after("<!-- example-shell -->").strip()
    assert shell.startswith("flowrate run --problem my_model.py:make_problem")
    done = run(["bash", "-c", shell], tmp_path)
    assert "two_layer_mlp/default" in done.stderr
    # the flagship example declares the FLOPs it executes: no warning, MFU not inflated
    assert flop_warnings(done.stderr) == []
    recorded = json.loads((tmp_path / "mlp.json").read_text())
    assert [w for w in recorded["warnings"] if "FLOP" in w] == []
    flops = recorded["flops"]
    assert flops["model_flops_per_sample"] == flops["executed_flops_per_sample"]
    done = run([sys.executable, "-c", block_after("<!-- example-python -->")], tmp_path)
    assert "samples/s" in done.stdout
    assert flop_warnings(done.stdout) == []


def test_examples_directory(tmp_path: Path) -> None:
    examples = ROOT / "examples"
    done = run(
        [
            "flowrate",
            "run",
            "--problem",
            f"{examples}/custom_problem.py:make_problem",
            "--steps",
            "5",
            "--preheat",
            "1",
            "--json",
            "-q",
        ],
        tmp_path,
    )
    assert '"small_convnet"' in done.stdout
    assert [w for w in json.loads(done.stdout)["warnings"] if "FLOP" in w] == []
    done = run([sys.executable, str(examples / "api_benchmark.py")], tmp_path)
    assert "transformer/debug" in done.stdout and "small_convnet" in done.stdout


def test_ci_runs_the_readme_commands() -> None:
    """.ci/run must do what the README tells a new user to do, word for word."""
    ci = (ROOT / ".ci" / "run").read_text()
    commands = re.findall(r"```bash\n(python3 -m venv[^\n]*)\n```", README)
    assert len(commands) == 2
    for command in commands:
        assert command in ci
