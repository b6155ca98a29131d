"""Bad input: one clear line on stderr, a non-zero exit code, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

USAGE, FAILED = 2, 1

# A user problem whose step runs out of memory above a batch size, or whose loss turns NaN.
FLAKY_PROBLEM = textwrap.dedent("""
    import torch
    from torch import nn
    import flowrate

    class Flaky(flowrate.Problem):
        name = "flaky"
        default_batch_size = 4

        def __init__(self, fits_up_to=1 << 30, nan_after=None):
            self.fits_up_to = fits_up_to
            self.nan_after = nan_after
            self.calls = 0

        def build_model(self):
            return nn.Sequential(nn.Linear(4, 2))

        def make_batch(self, batch_size, device, generator):
            x = torch.randn(batch_size, 4, device=device, generator=generator)
            return x, torch.randint(0, 2, (batch_size,), device=device, generator=generator)

        def loss(self, model, batch):
            x, y = batch
            if x.shape[0] > self.fits_up_to:
                raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {x.shape[0]} GiB")
            self.calls += 1
            loss = nn.functional.cross_entropy(model(x), y)
            if self.nan_after is not None and self.calls > self.nan_after:
                loss = loss * float("nan")
            return loss

        def parameter_count(self):
            return 10

        def forward_flops_per_sample(self):
            return 16

        def blocks(self, model):
            return list(model)

    def fits_8():
        return Flaky(fits_up_to=8)

    def nan_late():
        return Flaky(nan_after=6)

    def not_a_problem():
        return 42

    def explodes():
        raise ValueError("no such checkpoint")
""")


@pytest.fixture
def flaky(tmp_path: Path) -> str:
    path = tmp_path / "flaky.py"
    path.write_text(FLAKY_PROBLEM)
    return str(path)


def assert_one_line_error(out, code: int, *fragments: str) -> str:  # type: ignore[no-untyped-def]
    assert out.code == code, (out.code, out.stderr)
    lines = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, out.stderr
    assert "Traceback" not in out.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def test_unknown_problem_suggests_close_names(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("run", "--problem", "tranformer")
    assert_one_line_error(
        out, USAGE, "--problem", "unknown problem 'tranformer'", "did you mean 'transformer'"
    )
    out = run_cli("run", "--problem", "gpt2-mediun")
    assert_one_line_error(out, USAGE, "'gpt2-medium'")
    out = run_cli("run", "--problem", "transformer", "--size", "gpt3")
    assert_one_line_error(out, USAGE, "--size", "transformer has no size 'gpt3'")


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("flaky.py", "PATH.py:FACTORY"),
        ("missing.py:make", "no such file"),
        ("flaky.py:make_problem", "defines no 'make_problem'"),
        ("flaky.py:not_a_problem", "returned int"),
        ("flaky.py:explodes", "ValueError: no such checkpoint (flaky.py:"),
        ("flaky.py:bad-name", "is not a Python name"),
    ],
)
def test_malformed_user_problem(run_cli, flaky: str, spec: str, fragment: str) -> None:  # type: ignore[no-untyped-def]
    spec = spec.replace("flaky.py", flaky).replace("missing.py", str(Path(flaky).parent / "missing.py"))
    out = run_cli("run", "--problem", spec, "--steps", "2")
    assert out.code in (USAGE, FAILED)
    assert_one_line_error(out, out.code, fragment)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--batch-size", "0"), "--batch-size: must be a positive integer, got 0"),
        (("--batch-size", "lots"), "--batch-size: must be a positive integer or 'auto'"),
        (("--steps", "0"), "--steps: must be a positive integer"),
        (("--seq-len", "0"), "--seq-len: must be a positive integer"),
        (("--duration", "0"), "--duration: must be a positive number"),
        (("--heads", "3"), "--heads"),
        (("--image-size", "64"), "--image-size: does not apply to transformer"),
        (("--steps", "many"), "'many' is not a valid integer"),
        (("--precision", "fp8"), "--precision"),
        (("--device", "tpu"), "--device: unknown device 'tpu'"),
    ],
)
def test_bad_values(run_cli, args: tuple[str, ...], fragment: str) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("run", "--problem", "transformer", "--size", "debug", *args)
    assert_one_line_error(out, USAGE, fragment)


def test_precision_the_device_lacks(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("run", "--size", "debug", "--precision", "tf32", "--device", "cpu")
    assert_one_line_error(out, USAGE, "--precision", "tf32", "on the CPU use")


def test_out_of_memory_says_what_to_lower(run_cli, flaky: str) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("run", "--problem", f"{flaky}:fits_8", "--batch-size", "32", "--steps", "2")
    assert_one_line_error(out, FAILED, "out of memory at batch size 32", "--batch-size auto")


def test_batch_size_auto_halves_until_it_fits(run_cli, flaky: str) -> None:  # type: ignore[no-untyped-def]
    out = run_cli(
        "run",
        "--problem",
        f"{flaky}:fits_8",
        "--batch-size",
        "auto",
        "--max-batch-size",
        "64",
        "--steps",
        "3",
        "--preheat",
        "1",
        "--json",
    )
    assert out.code == 0, out.stderr
    data = out.json()
    assert data["batch_size"] == 8
    assert data["batch_size_search"] == [
        {"batch_size": 64, "fits": False},
        {"batch_size": 32, "fits": False},
        {"batch_size": 16, "fits": False},
        {"batch_size": 8, "fits": True},
    ]
    assert data["config"]["batch_size"] == "auto"
    assert data["summary"]["timed_samples"] == 24


def test_non_finite_loss_stops_and_names_the_step(run_cli, flaky: str) -> None:  # type: ignore[no-untyped-def]
    # call 1 counts executed FLOPs, preheat is calls 2-3, timed steps 0.. are calls 4..;
    # NaN from call 7 = timed step 3
    out = run_cli(
        "run",
        "--problem",
        f"{flaky}:nan_late",
        "--preheat",
        "2",
        "--steps",
        "8",
        "--sample-every",
        "2",
    )
    assert_one_line_error(out, FAILED, "timed step 3", "loss became nan")


def test_real_entry_point_has_no_traceback(tmp_path: Path) -> None:
    """The installed console script, in a fresh process, as a user runs it."""
    exe = Path(sys.executable).with_name("flowrate")
    command = (
        [str(exe)] if exe.exists() else [sys.executable, "-c", "from flowrate.cli.main import main; main()"]
    )
    done = subprocess.run(
        [*command, "run", "--problem", "nope"], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == USAGE
    assert done.stderr.strip().startswith("error:") and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    ok = subprocess.run(
        [*command, "run", "--size", "debug", "--steps", "2", "--preheat", "1", "--json", "-q"],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["summary"]["timed_steps"] == 2


def test_unwritable_out_fails_before_the_run(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    out = run_cli("run", "--size", "debug", "--steps", "2", "--out", str(blocker / "r.json"))
    assert_one_line_error(out, USAGE, "--out: cannot create the folder")
    assert "flowrate: transformer" not in out.stderr  # refused before anything ran


def test_sample_shape_needs_a_zoo_problem_that_has_one(run_cli, flaky: str) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("run", "--problem", "fc_mnist", "--sample-shape", "64")
    assert_one_line_error(out, USAGE, "--sample-shape: fc_mnist has no sample shape to set")
    out = run_cli("run", "--problem", f"{flaky}:fits_8", "--sample-shape", "64")
    assert_one_line_error(out, USAGE, "--sample-shape: applies to zoo problems only")
