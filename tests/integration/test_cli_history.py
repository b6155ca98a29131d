"""`flowrate history` and `flowrate noise` end to end on hand-made runs in a real store.

Runs carry a chosen commit and time (tests/factories.py), so the order, the points, the step
and the noise figures are known in advance.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import factories
from flowrate.results.schema import Result
from flowrate.results.store import Store

SPREAD = (0.98, 1.0, 1.02)
# 12 commits, two runs each; a 10% drop from commit 7 on; between-run noise ~0.5%
LEVELS = [1000.0] * 6 + [900.0] * 6
JITTER = (1.004, 0.996)


def run(median: float, run_id: str, commit: str | None, hour: int, *, batch_size: int = 8) -> Result:
    return factories.make_result(
        interval_rates=[median * f for f in SPREAD],
        run_id=run_id,
        batch_size=batch_size,
        created_at=f"2026-11-20T{hour:02d}:00:00+00:00",
        environment={"flowrate": {"version": "0.1.0", "commit": commit, "dirty": False}},
    )


@pytest.fixture
def store(results_store: Path) -> Path:
    with Store(results_store) as opened:
        for i, level in enumerate(LEVELS):
            for j, jitter in enumerate(JITTER):
                opened.add(
                    run(level * jitter * (1 + 0.001 * (i % 3)), f"r{i:02d}{j}", f"c{i:02d}" + "0" * 37, i)
                )
        # another configuration with one point only
        opened.add(run(500.0, "other0", "c00" + "0" * 37, 1, batch_size=16))
    return results_store


def test_history_detects_the_step_and_names_the_first_commit_after_it(run_cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("history", "-p", "fc_mnist", "--detect", "--json")
    assert outcome.code == 0, outcome.stderr
    (series,) = outcome.json()
    assert series["ordered_by"] == "commit" and series["configuration"]["batch_size"] == 8
    assert [p["label"] for p in series["points"]] == [f"c{i:02d}0000000" for i in range(12)]
    assert all(p["runs"] == 2 for p in series["points"])
    (step,) = series["steps"]
    assert step["index"] == 6 and step["first_after"] == "c060000000"
    assert (
        step["relative"] == pytest.approx(-0.1, abs=0.002)
        and step["ci_low"] < step["relative"] < step["ci_high"]
    )
    table = run_cli("history", "-p", "fc_mnist", "--detect")
    assert "step before commit c060000000 (point 7): -10.0% [" in table.stderr
    assert "one point (c000000000), no history to fit; left out" in table.stderr


def test_fail_if_slower_gates_an_unrecovered_drop(run_cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    failed = run_cli("history", "-p", "fc_mnist", "--fail-if-slower", "5")
    assert failed.code == 1
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "dropped -10.0% [" in errors[0] and "before c060000000" in errors[0]
    assert run_cli("history", "-p", "fc_mnist", "--fail-if-slower", "15").code == 0


def test_runs_without_commits_fall_back_to_time_order_and_say_so(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    with Store(results_store) as opened:
        for i, level in enumerate([1000.0, 1003.0, 998.0, 1001.0]):
            opened.add(run(level, f"t{i}", None, 3 - i))  # recorded in reverse id order
    outcome = run_cli("history", "-p", "fc_mnist", "--detect", "--json")
    assert outcome.code == 0, outcome.stderr
    (series,) = outcome.json()
    assert series["ordered_by"] == "time" and [p["label"] for p in series["points"]] == [
        "t3",
        "t2",
        "t1",
        "t0",
    ]
    assert series["steps"] == []
    assert "warning: 4 of 4 runs record no commit: points are runs in time order" in outcome.stderr


def test_bad_input_is_one_line(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    with Store(results_store) as opened:
        opened.add(run(1000.0, "only1", "c1" + "0" * 38, 1))
    one = run_cli("history", "-p", "fc_mnist", "--detect")
    assert one.code == 2 and one.stderr.count("\n") == 1
    assert "a history needs 2 points or more; the runs that match make one (c100000000)" in one.stderr
    unnamed = run_cli("history")
    assert unnamed.code == 2 and "name the problem: flowrate history -p PROBLEM" in unnamed.stderr
    assert run_cli("history", "-p", "nosuch").code == 2


def test_noise_shows_each_configuration(run_cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("noise", "--json")
    assert outcome.code == 0, outcome.stderr
    rows = outcome.json()
    assert [r["runs"] for r in rows] == [24, 1]
    main = rows[0]
    # pooled over commits: each commit's pair is its mean ·1.004 and ·0.996, one degree of freedom
    # each: √(2 · 0.004²); the 10% step between commits is not noise
    assert main["between_cv"] == pytest.approx(0.004 * 2**0.5)
    assert main["within_cv"] == pytest.approx(0.02)  # intervals at 0.98, 1, 1.02 of each median
    # the runs differ less than 3 intervals' medians would by chance (0.02² / 3 > 0.0057²): no offset
    assert main["icc"] == 0.0
    assert rows[1]["between_cv"] is None and rows[1]["icc"] is None
    table = run_cli("noise", "-p", "fc_mnist")
    assert table.code == 0 and "between-run CV" in table.stdout and "0.6%" in table.stdout


def test_the_report_plots_the_history_with_its_steps(run_cli, store: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "report.html"
    assert run_cli("report", "-p", "fc_mnist", "--out", str(out)).code == 0
    page = out.read_text()
    section = page.split('<section id="history">')[1].split("</section>")[0]
    assert section.count("<figure>") == 1 and section.count('<img class="plot"') == 1
    assert ": 12 points; steps: -10.0% before c060000000</figcaption>" in section
