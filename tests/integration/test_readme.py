"""The README's examples, the own-model guide's and examples/ run exactly as a user would run them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from docs_blocks import DOCS, blocks

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
BIN = Path(sys.executable).parent


def block_after(marker: str) -> str:
    match = re.search(re.escape(marker) + r"\s*```\w*\n(.*?)```", README, re.S)
    assert match, f"README has no code block after {marker!r}"
    return match.group(1)


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # as a new user: the installed `flowrate` first on PATH, the default store (./flowrate.db)
    env = {k: v for k, v in os.environ.items() if k != "FLOWRATE_STORE"}
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done


def flop_warnings(text: str) -> list[str]:
    """The warnings that say a problem's declared FLOPs disagree with what PyTorch executed."""
    return [line for line in text.splitlines() if "warning" in line and "FLOP" in line]


def guide_block(page: str, action: str, language: str) -> str:
    """The one block of a docs page with this marker and language."""
    every = blocks(page, (DOCS / page).read_text())
    found = [b.code for b in every if (b.action, b.language) == (action, language)]
    assert len(found) == 1, f"{page} has {len(found)} {language} blocks marked {action}"
    return found[0]


def test_own_model_guide_from_cli_and_python(tmp_path: Path) -> None:
    """The guide's model file, its command and its Python, with the figures a user relies on checked."""
    page = "guides/own-model.md"
    (tmp_path / "my_model.py").write_text(guide_block(page, "file", "python"))
    shell = guide_block(page, "run", "bash").strip()
    assert shell.startswith("flowrate run --problem my_model.py:make_problem")
    done = run(["bash", "-c", shell], tmp_path)
    assert "two_layer_mlp/default" in done.stderr
    # the flagship example declares the FLOPs it executes: no warning, MFU not inflated
    assert flop_warnings(done.stderr) == []
    recorded = json.loads((tmp_path / "mlp.json").read_text())
    assert [w for w in recorded["warnings"] if "FLOP" in w] == []
    flops = recorded["flops"]
    assert flops["model_flops_per_sample"] == flops["executed_flops_per_sample"]
    done = run([sys.executable, "-c", guide_block(page, "run", "python")], tmp_path)
    assert "samples/s" in done.stdout
    assert flop_warnings(done.stdout) == []


@pytest.mark.slow
def test_readme_tour(tmp_path: Path) -> None:
    """The README's tour, as written: two recorded runs, compared, listed and reported."""
    done = run(["bash", "-euo", "pipefail", "-c", block_after("<!-- example-tour -->")], tmp_path)
    assert "transformer/debug" in done.stderr
    assert "2 runs in flowrate.db" in done.stdout
    assert "report written to report.html (2 runs)" in done.stderr
    assert (tmp_path / "report.html").stat().st_size > 0


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
