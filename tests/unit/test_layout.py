"""The shape of the code: `flowrate --help` stays light, and the import contract holds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_help_imports_no_heavy_library() -> None:
    """The CLI loads each command on use, so `flowrate --help` never waits for torch."""
    code = (
        "import sys\n"
        "from flowrate.cli.main import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in ('torch', 'numpy', 'scipy', 'matplotlib') if m in sys.modules]\n"
        "print('heavy:' + ','.join(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "heavy:"


def test_the_import_contract_holds() -> None:
    """Layers import only downward and no sibling modules import each other in a circle."""
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    done = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "3 kept, 0 broken" in done.stdout


def test_showing_a_serving_run_needs_no_http_client() -> None:
    """`flowrate show` lays out a stored load test without serve-bench's client (aiohttp)."""
    code = "import sys, flowrate.cli.serve_bench_text\nprint('aiohttp' in sys.modules)\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
