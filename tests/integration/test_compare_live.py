"""`flowrate compare --run A_SPEC B_SPEC`: both sides measured now, interleaved, each run recorded."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from flowrate.campaigns.compare import live
from flowrate.campaigns.compare.plan import BudgetTooSmall
from flowrate.campaigns.process import child
from flowrate.results.store import Store

TINY = "-p fc_mnist --size debug --device cpu --steps 4 --preheat 1"
SPECS = (f"{TINY} --batch-size 16", f"{TINY} --batch-size 32")
BUDGETED = "-p fc_mnist --size debug --device cpu --preheat 1 --min-steps 1"  # --budget sets --duration


def _tags(stderr: str) -> tuple[str, str]:
    found = re.search(r"tagged (compare:[0-9a-f]{8}):A and compare:[0-9a-f]{8}:B", stderr)
    assert found, stderr
    return f"{found[1]}:A", f"{found[1]}:B"


@pytest.mark.slow
def test_the_sides_run_interleaved_each_recorded_and_tagged(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("compare", "--run", *SPECS, "--runs", "2")
    assert outcome.code == 0, outcome.stderr
    order = re.findall(r"run (\d) \(([AB])\): median", outcome.stderr)
    assert order == [("1", "A"), ("2", "B"), ("3", "B"), ("4", "A")]
    tag_a, tag_b = _tags(outcome.stderr)
    with Store(results_store) as store:
        side_a, side_b = store.resolve(tag_a), store.resolve(tag_b)
    assert len(side_a) == len(side_b) == 2
    assert {run.result.batch_size for run in side_a} == {16} and {
        run.result.batch_size for run in side_b
    } == {32}
    # shown as `flowrate compare` shows recorded runs: the runs a side and the method named
    assert "2 / 2" in outcome.stdout and tag_a in outcome.stdout
    assert "fixed count: 2 runs a side, interleaved A B B A" in outcome.stderr
    assert "t-test of the log ratio" in outcome.stderr
    # the recorded runs compare again by their tags
    again = run_cli("compare", tag_a, tag_b, "--format", "json")
    assert again.code == 0 and again.json()["metrics"][0]["n_a"] == 2


@pytest.mark.slow
def test_an_interrupt_keeps_the_recorded_runs_and_shows_the_verdict_so_far(
    run_cli,  # type: ignore[no-untyped-def]
    results_store: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = child.run_in_fresh_process
    launched: list[object] = []

    def interrupted_at_the_third(config: Any, **kwargs: Any) -> child.ChildOutcome:
        if len(launched) == 2:
            raise KeyboardInterrupt  # Ctrl-C as the third run starts
        launched.append(config)
        return real(config, **kwargs)

    monkeypatch.setattr(child, "run_in_fresh_process", interrupted_at_the_third)
    outcome = run_cli("compare", "--run", *SPECS, "--runs", "3")
    assert outcome.code == 130
    assert "interrupted after 2 runs (1 of A, 1 of B); they stay recorded" in outcome.stderr
    assert "1 / 1" in outcome.stdout  # the table of the runs so far
    tag_a, tag_b = _tags(outcome.stderr)
    with Store(results_store) as store:
        assert len(store.resolve(tag_a)) == len(store.resolve(tag_b)) == 1


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--run", TINY, "-p transformer"), "the sides run different problems"),
        (
            ("--run", TINY, f"{TINY} --batch-size 0"),
            f"side B ('{TINY} --batch-size 0'): --batch-size",
        ),
        (("--run", TINY, f"{TINY} --out x.json"), "side B ("),
        (("--run", TINY, TINY, "--max-runs", "5"), "--max-runs: bounds --until-ci"),
        (("--run", TINY, TINY, "--until-ci", "1", "--runs", "9", "--max-runs", "5"), "at least --runs (9)"),
        (("x", "--run", TINY, TINY), "give no A or B"),
        (("x",), "give A and B"),
        (("x", "--runs", "3"), "measure the sides now: give --run"),
        (("x", "--budget", "1m"), "measure the sides now: give --run"),
        (("--run", TINY, TINY, "--budget", "1m"), "--steps is chosen by --budget: leave it out"),
        (
            ("--run", BUDGETED, BUDGETED, "--budget", "1m", "--max-runs", "5"),
            "--max-runs: bounds --until-ci;",
        ),
        (("--run", BUDGETED, BUDGETED, "--budget", "1m", "--test", "mannwhitney"), "--test: with --budget"),
    ],
)
def test_bad_input_is_one_line_before_any_run(run_cli, args: tuple[str, ...], says: str) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("compare", *args)
    assert outcome.code == 2, outcome.stderr
    assert says in outcome.stderr and "Traceback" not in outcome.stderr
    assert "run 1" not in outcome.stderr


def _git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def test_a_revision_that_does_not_build_is_named_with_its_log(
    run_cli,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    package = tmp_path / "src" / "flowrate"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('this revision is broken')\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "broken")
    monkeypatch.chdir(tmp_path)
    outcome = run_cli("compare", "--rev", "HEAD", "--rev", "HEAD", "--run", TINY, TINY)
    assert outcome.code == 2
    found = re.search(
        r"error: revision HEAD \([0-9a-f]{12}\) does not build: see (\S+install\.log)", outcome.stderr
    )
    assert found, outcome.stderr
    assert "this revision is broken" in Path(found[1]).read_text()
    assert "Traceback" not in outcome.stderr and "run 1" not in outcome.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--rev", "no-such-rev", "--rev", "HEAD", "--run", TINY, TINY), "'no-such-rev' is not a commit"),
        (("--rev", "HEAD", "--run", TINY, TINY), "--rev is given twice"),
        (("--rev", "HEAD", "--rev", "HEAD"), "measure the sides now: give --run"),
        (("a", "b", "--until-ci", "1"), "measure the sides now: give --run"),
    ],
)
def test_bad_revisions_are_one_line(run_cli, args: tuple[str, ...], says: str) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("compare", *args)
    assert outcome.code == 2 and says in outcome.stderr, outcome.stderr


@pytest.mark.slow
def test_each_side_runs_at_its_revision_recorded_with_its_commit(
    run_cli,  # type: ignore[no-untyped-def]
    results_store: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checkout = Path(__file__).resolve().parents[2]
    found = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, check=False
    )
    if found.returncode != 0:
        pytest.skip("not a git checkout")
    monkeypatch.chdir(checkout)
    head = _git(checkout, "rev-parse", "HEAD")
    outcome = run_cli("compare", "--rev", "HEAD", "--rev", "HEAD", "--run", TINY, TINY, "--runs", "1")
    assert outcome.code == 0, outcome.stderr
    assert f"at HEAD ({head[:12]})" in outcome.stderr
    tag_a, tag_b = _tags(outcome.stderr)
    with Store(results_store) as store:
        runs = store.resolve(tag_a) + store.resolve(tag_b)
    assert len(runs) == 2
    assert {run.result.environment.commit for run in runs} == {head}
    # the revision's own code ran: its process imported flowrate from the cached tree
    assert all("/revs/" + head in (run.result.environment.command_line or [""])[0] for run in runs)


def test_a_budget_runs_a_first_block_then_the_planned_blocks_and_reports_them(  # type: ignore[no-untyped-def]
    run_cli,
    results_store: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the budget is counted on a clock on which every process takes 2 s more than it measures,
    # whatever this machine's load (a pair that takes turns: both processes' time)
    real, real_pair = child.run_in_fresh_process, child.run_in_turns
    launched: list[object] = []

    def counted(config: Any, **kwargs: Any) -> child.ChildOutcome:
        launched.append(config)
        return real(config, **kwargs)

    def counted_pair(first: Any, second: Any, **kwargs: Any) -> tuple[child.ChildOutcome, child.ChildOutcome]:
        launched.extend((first, second))
        pairs.append(len(launched))
        return real_pair(first, second, **kwargs)

    pairs: list[int] = []
    monkeypatch.setattr(child, "run_in_fresh_process", counted)
    monkeypatch.setattr(child, "run_in_turns", counted_pair)
    monkeypatch.setattr(live, "clock", lambda: sum(2.0 + config.duration_s for config in launched))  # type: ignore[attr-defined]
    outcome = run_cli("compare", "--run", BUDGETED, BUDGETED, "--budget", "24s", "--format", "json")
    assert outcome.code == 0, outcome.stderr
    # a first block of 4 processes of 0.5 s (24 s × 25% / 4 less 1 s of start-up, at least 0.5 s)
    # leaves 14 s: one block of 2 a side (of 0.5 or 1 s: both fit once; the steadier wins), no more
    assert "a first A B B A block of 0.5 s runs" in outcome.stderr
    order = re.findall(r"run (\d+) \(([AB])\): median", outcome.stderr)
    assert "".join(label for _, label in order) == "ABBAABBA"
    assert re.search(r"plan: 2 processes of [0-9.]+ s a side: between-run CV [0-9.]+%", outcome.stderr)
    budget = outcome.json()["budget"]
    seconds = budget["plan"]["seconds"]
    assert [config.duration_s for config in launched] == [0.5] * 4 + [seconds] * 4  # type: ignore[attr-defined]
    assert {config.min_steps for config in launched} == {1}  # type: ignore[attr-defined]  # the seconds set the length
    # the first block's two pairs are compared with the planned two
    assert (budget["budget_s"], budget["stopped"], budget["runs_a_side"]) == (24.0, "budget spent", 4)
    assert budget["plan"]["noise"]["startup_s"] == pytest.approx(2.0)
    assert seconds in (0.5, 1.0)
    # and the instant it took to read the flags
    assert budget["elapsed_s"] == pytest.approx(10.0 + 4 * (2.0 + seconds), abs=1.0)
    assert budget["first_block"]["processes"] == 4
    # both sides run this checkout on the CPU: every block is two pairs of processes taking turns
    assert pairs == [2, 4, 6, 8]
    reason = budget["plan"]["reason"]
    assert reason.endswith("in pairs of processes that take turns (the first block's 2 pairs counted)")
    assert budget["analysis"] == "turns"
    throughput = next(m for m in outcome.json()["metrics"] if m["metric"] == "samples_per_sec")
    assert throughput["method"].startswith("paired t-test of the pairs' log ratios (4 pairs")
    interval = budget["interval"]
    assert interval["level"] == 0.95 and interval["low"] < interval["ratio"] < interval["high"]
    found = re.search(
        r"in 4 pairs that took turns, the first block's 2 \(tagged (compare:[0-9a-f]{8}):pilot\) among them, "
        r"2[02] s of the 24 s budget",
        outcome.stderr,
    )
    assert found, outcome.stderr
    with Store(results_store) as store:
        assert len(store.resolve(f"{found[1]}:pilot")) == 4
        side_a = store.resolve(f"{found[1]}:A")
        assert len(side_a) == len(store.resolve(f"{found[1]}:B")) == 4  # the first block's among them
    # a run that took turns meters no energy: the counter counted its partner's work too
    assert "taking turns" in (side_a[0].result.energy.reason or "")
    # each run is recorded with the command that makes it again: the spec and the plan's length
    command = ["flowrate", "run", *BUDGETED.split(), "--duration", f"{seconds:g}"]
    planned = next(run for run in side_a if run.result.config.duration_s == seconds)
    assert planned.result.environment.command_line == command
    # compared again from the store, the sides are paired by pair as they were (run_design)
    again = run_cli("compare", f"{found[1]}:A", f"{found[1]}:B", "--format", "json")
    assert again.code == 0, again.stderr
    stored = next(m for m in again.json()["metrics"] if m["metric"] == "samples_per_sec")
    assert stored["method"] == throughput["method"]
    assert [stored[k] for k in ("ratio", "ci_low", "ci_high")] == pytest.approx(
        [throughput[k] for k in ("ratio", "ci_low", "ci_high")]
    )


@pytest.mark.parametrize(
    ("flags", "wanted"),
    [
        (("--fail-if-slower", "3"), 0.03),  # the gate sees a slowdown only beyond the half-width
        (("--until-ci", "2", "--fail-if-slower", "3"), 0.02),  # --until-ci says the width itself
        ((), None),
    ],
)
def test_a_budget_plan_is_told_the_width_the_gate_or_until_ci_asks_for(  # type: ignore[no-untyped-def]
    run_cli, monkeypatch: pytest.MonkeyPatch, flags: tuple[str, ...], wanted: float | None
) -> None:
    asked: list[float | None] = []

    def planned(*args: Any, wanted: float | None = None, **kwargs: Any) -> None:
        asked.append(wanted)
        raise BudgetTooSmall(60.0, 90.0)  # ends the command before any process starts

    monkeypatch.setattr(live, "compare_within_budget", planned)
    outcome = run_cli("compare", "--run", BUDGETED, BUDGETED, "--budget", "60s", *flags)
    assert outcome.code == 2 and "at least 90s" in outcome.stderr
    assert asked == [wanted]
