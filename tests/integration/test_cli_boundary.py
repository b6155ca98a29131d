"""The CLI's one boundary (issue 14): exit codes by what failed, OSError as one line (a closed
pipe quietly), user code named by file and line, bounds on every number, and the friction fixes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections import namedtuple
from pathlib import Path

import pytest

from factories import make_result
from flowrate.results.store import Store

USAGE, FAILED, READER_GONE = 2, 1, 141
HUGE = "99999999999999999999999"
TINY = ("-p", "fc_mnist", "--size", "debug", "--steps", "2", "--preheat", "1")


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def one_error(out, code: int, *fragments: str) -> str:  # type: ignore[no-untyped-def]
    assert out.code == code, (out.code, out.stderr)
    [line] = error_lines(out.stderr)
    assert "Traceback" not in out.stderr
    for fragment in fragments:
        assert fragment in line, line
    return line


@pytest.fixture
def two_runs(results_store: Path) -> list[str]:
    ids = ["aaaa00000001", "bbbb00000002"]
    with Store(results_store) as store:
        for run_id in ids:
            store.add(make_result(run_id=run_id), ["nightly"])
    return ids


def flowrate(*args: str, stdout: object = subprocess.PIPE, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    """`python -m flowrate ARGS` in a process of its own."""
    done = subprocess.run(
        [sys.executable, "-m", "flowrate", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )
    return namedtuple("Done", "code stdout stderr")(done.returncode, done.stdout or "", done.stderr)


# --- exit codes: 2 bad input, 1 a run that failed ------------------------------------------------


def test_bad_input_anywhere_exits_2(run_cli, two_runs: list[str], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    one_error(run_cli("show", "ffff99999999"), USAGE, "ffff99999999")
    one_error(run_cli("runs", "--since", "yesterday"), USAGE, "--since")
    one_error(run_cli("runs", "--tag", ""), USAGE, "--tag")
    one_error(run_cli("pareto", "--objective", "nosuch"), USAGE, "nosuch")
    one_error(run_cli("run", *TINY, "--data", str(tmp_path / "nothing")), USAGE, "nothing")
    one_error(run_cli("runs", "--store", str(tmp_path / "none.db")), USAGE, "none.db")
    foreign = tmp_path / "songs.db"
    foreign.write_bytes(b"SQLite format 3\x00" + b"\x00" * 4000)
    one_error(run_cli("runs", "--store", str(foreign)), USAGE)


def test_a_bad_peak_file_is_bad_input_naming_the_variable(run_cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    peaks = tmp_path / "peaks.json"
    peaks.write_bytes(b"\xff\xfe\x00")
    monkeypatch.setenv("FLOWRATE_PEAKS", str(peaks))
    one_error(run_cli("run", *TINY, "--no-store"), USAGE, "FLOWRATE_PEAKS", "peaks.json", "not UTF-8")


# --- numbers: bounded as the command line is read --------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--steps", HUGE, "--steps: must be at most 1000000000"),
        ("--batch-size", HUGE, "--batch-size: must be at most 2147483647 (2**31 - 1)"),
        ("--duration", "inf", "--duration: must be at most 604800 s (7 days), got inf"),
        ("--lr", "nan", "--lr: must be a positive number, got nan"),
        ("--threads", "100000", "--threads: must be at most 1024"),
        ("--seed", "-1", "--seed: must be an integer 0 or more"),
        ("--hidden", HUGE, "--hidden: must be at most 2147483647"),
        ("--repeat", "1001", "'--repeat'"),
        ("--batch-size", "--steps", "--batch-size: must be a positive integer or 'auto', got '--steps'"),
    ],
)
def test_numeric_flags_are_bounded_before_any_work(run_cli, flag: str, value: str, says: str) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("run", *TINY, flag, value)
    one_error(out, USAGE, says)
    assert "flowrate: fc_mnist" not in out.stderr  # refused before the run began


@pytest.mark.parametrize(
    "args",
    [
        ("compare", "a", "b", "--alpha", "nan"),
        ("compare", "a", "b", "--fail-if-slower", "inf"),
        ("runs", "-n", HUGE),
        ("data", "make", "-p", "fc_mnist", "--samples", HUGE, "-o", "d"),
    ],
)
def test_other_commands_numbers_are_bounded(run_cli, args: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    one_error(run_cli(*args), USAGE, f"'{args[-2] if args[0] != 'data' else '--samples'}'")


def test_data_make_checks_the_free_space_first(run_cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=1000))
    out = run_cli(
        "data", "make", "-p", "fc_mnist", "--size", "debug", "--samples", "100", "-o", str(tmp_path / "d")
    )
    one_error(out, USAGE, "--samples: 100 samples of fc_mnist/debug take", "1 kB free")
    assert not (tmp_path / "d").exists()


def test_more_threads_than_cores_is_a_warning(run_cli) -> None:  # type: ignore[no-untyped-def]
    from flowrate.measure.inputs import usable_cores

    out = run_cli("run", *TINY, "--no-store", "-q", "--threads", str(usable_cores() + 1))
    assert out.code == 0, out.stderr
    [warning] = [line for line in out.stderr.splitlines() if "more than this machine's" in line]
    assert warning.startswith("warning:") and f"this machine's {usable_cores()} cores" in warning


# --- the user's code: named by file and line, never a pass ----------------------------------------

USER = textwrap.dedent("""
    import sys
    import torch
    from torch import nn
    import flowrate


    class Mine(flowrate.Problem):
        def __init__(self, how):
            self.how = how

        def build_model(self):
            if self.how == "raise":
                raise RuntimeError("no weights here")
            if self.how == "exit":
                sys.exit(0)
            return nn.Linear(4, 2)

        def make_batch(self, batch_size, device, generator):
            return (torch.randn(batch_size, 4, device=device, generator=generator),)

        def loss(self, model, batch):
            out = model(batch[0])
            return out if self.how == "vector" else out.mean()

        def parameter_count(self):
            return 10

        def forward_flops_per_sample(self):
            return 16


    def raises():
        return Mine("raise")


    def exits():
        return Mine("exit")


    def vector():
        return Mine("vector")
""")


@pytest.fixture
def mine(tmp_path: Path) -> Path:
    path = tmp_path / "mine.py"
    path.write_text(USER)
    return path


def _line_of(source: str, text: str) -> int:
    return next(n for n, line in enumerate(source.splitlines(), start=1) if text in line)


def test_an_exception_in_the_users_code_names_its_file_and_line(run_cli, mine: Path) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("run", "-p", f"{mine}:raises", "--steps", "2", "--no-store")
    line = _line_of(USER, 'raise RuntimeError("no weights here")')
    one_error(out, FAILED, f"build_model() failed: RuntimeError: no weights here (mine.py:{line})")


def test_sys_exit_in_the_users_code_is_a_failure_not_a_pass(run_cli, mine: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("run", "-p", f"{mine}:exits", "--steps", "2", "--no-store")
    one_error(
        out,
        FAILED,
        "build_model() called sys.exit(0) during the run",
        f"mine.py:{_line_of(USER, 'sys.exit(0)')}",
    )
    at_import = tmp_path / "leaves.py"
    at_import.write_text("import sys\n\nsys.exit(0)\n")
    out = run_cli("run", "-p", f"{at_import}:make", "--steps", "2")
    one_error(out, USAGE, "leaves.py called sys.exit(0) while flowrate imported it (leaves.py:3)")


def test_a_loss_that_is_no_scalar_is_named(run_cli, mine: Path) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("run", "-p", f"{mine}:vector", "--steps", "2", "--no-store")
    one_error(
        out, FAILED, "mine.py: loss() must return the loss as a scalar tensor", "shape (8, 2)"
    )  # default batch 8


def test_a_syntax_error_points_at_the_users_line(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    broken = tmp_path / "broken.py"
    broken.write_text("x = 1\n\ndef make(:\n    pass\n")
    line = one_error(run_cli("run", "-p", f"{broken}:make"), USAGE, "SyntaxError", "(broken.py:3)")
    assert "frozen" not in line


# --- streams: a reader that went away, a full disk -------------------------------------------------


def test_a_closed_pipe_ends_quietly(two_runs: list[str]) -> None:
    reader, writer = os.pipe()
    os.close(reader)  # `| head -1` that has already gone
    try:
        done = flowrate("runs", "--json", stdout=writer)
    finally:
        os.close(writer)
    assert done.code == READER_GONE
    assert done.stderr == ""  # no error line, no traceback, no "Exception ignored"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_on_stdout_is_one_line(two_runs: list[str]) -> None:
    with open("/dev/full", "w") as full:
        done = flowrate("runs", "--json", stdout=full)
    assert done.code == FAILED
    assert done.stderr.strip() == "error: cannot write to standard output: No space left on device"


def test_under_torchrun_only_rank_0_says_it(tmp_path: Path) -> None:
    ranks = {
        rank: flowrate("run", "-p", "nope", env={"RANK": str(rank), "WORLD_SIZE": "2"}) for rank in (0, 1)
    }
    assert ranks[0].code == ranks[1].code == USAGE
    assert len(error_lines(ranks[0].stderr)) == 1 and "nope" in ranks[0].stderr
    assert ranks[1].stderr == ""


# --- friction --------------------------------------------------------------------------------------


def test_a_flag_is_blamed_as_typed(run_cli) -> None:  # type: ignore[no-untyped-def]
    line = one_error(
        run_cli("run", "-p", "fc_mnist", "--size", "debug", "-O", "nosuch=3"), USAGE, "-O nosuch"
    )
    assert "--nosuch" not in line
    line = one_error(
        run_cli("run", "-p", "bert-base", "--size", "debug", "--sample-shape", "100000"),
        USAGE,
        "--sample-shape:",
    )
    assert "--seq-len" not in line


def test_inspection_output_goes_to_stdout(run_cli, two_runs: list[str]) -> None:  # type: ignore[no-untyped-def]
    shown = run_cli("show", two_runs[0])
    assert shown.code == 0 and f"flowrate run {two_runs[0]}" in shown.stdout
    listed = run_cli("runs", "-n", "1")
    assert "1 run in" in listed.stdout and "1 runs" not in listed.stdout


def test_a_narrow_terminal_keeps_whole_run_ids_and_cuts_long_tags(
    run_cli, results_store: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    from flowrate.cli import console

    with Store(results_store) as store:
        store.add(
            make_result(run_id="cafe00000001", device_name="A Very Long Accelerator Name " * 3), ["t" * 90]
        )
    monkeypatch.setattr(console._out, "width", 110)
    out = run_cli("runs")
    assert out.code == 0, out.stderr
    assert "cafe00000001" in out.stdout
    assert "t" * 90 not in out.stdout and "…" in out.stdout
    assert max(len(line) for line in out.stdout.splitlines()) <= 110


def test_a_report_is_html_only(run_cli, two_runs: list[str], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    one_error(run_cli("report", "--out", str(tmp_path / "r.pdf")), USAGE, "--out", "r.pdf")
    assert not (tmp_path / "r.pdf").exists()
    assert run_cli("report", "--out", str(tmp_path / "r.htm")).code == 0


def test_tags_are_checked_before_the_run(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("run", *TINY, "-t", "night\nly")
    one_error(out, USAGE, "--tag")
    assert "flowrate: fc_mnist" not in out.stderr
