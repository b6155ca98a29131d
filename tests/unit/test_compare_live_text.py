"""What `flowrate compare --run` prints around its runs: pure renderers, exact lines."""

from __future__ import annotations

from pathlib import Path

from flowrate.campaigns.compare.interleave import FIXED, INTERRUPTED, Interleaved, StoppingRule
from flowrate.campaigns.compare.live import LiveComparison, LiveRun, Side
from flowrate.campaigns.compare.revisions import Revision
from flowrate.cli.compare_live_text import closing_line, opening_lines, run_line

LABELS = ("compare:0123abcd:A", "compare:0123abcd:B")


def test_the_opening_names_each_side_its_revision_and_the_rule() -> None:
    sides = [
        Side("A", "-p fc_mnist", ["-p", "fc_mnist"], None, Revision("main", "a" * 40, Path("/src"))),
        Side("B", "-p fc_mnist --batch-size 64", ["-p", "fc_mnist", "--batch-size", "64"], None),
    ]
    assert opening_lines(sides, StoppingRule(runs=2, alpha=0.05)) == [
        f"A: flowrate run -p fc_mnist at main ({'a' * 12})",
        "B: flowrate run -p fc_mnist --batch-size 64",
        "stopping: fixed count: 2 runs a side, interleaved A B B A",
    ]


def test_a_run_is_one_line_with_its_median_throughput() -> None:
    assert run_line(LiveRun(3, "B", 1234.5678, "r42")) == "run 3 (B): median 1235 samples/s, run r42"


def test_the_closing_line_says_how_it_ended_and_how_to_see_it_again() -> None:
    done = Interleaved({"A": [1.0, 2.0], "B": [1.0, 2.0]}, FIXED)
    assert closing_line(LiveComparison(done, None, 4, LABELS, Path("/s/results.db"))) == (
        "fixed count: 2 runs a side, tagged compare:0123abcd:A and compare:0123abcd:B in "
        "/s/results.db: `flowrate compare compare:0123abcd:A compare:0123abcd:B` shows them again"
    )
    stopped = Interleaved({"A": [1.0], "B": [1.0, 2.0]}, INTERRUPTED)
    assert closing_line(LiveComparison(stopped, None, 3, LABELS, Path("/s/results.db"))).startswith(
        "interrupted after 3 runs (1 of A, 2 of B); they stay recorded, tagged compare:0123abcd:A"
    )


def test_the_budget_line_gives_the_plan_the_runs_and_the_analysis() -> None:
    from flowrate.cli.compare_text import budget_line

    budget = {
        "budget_s": 120.0,
        "elapsed_s": 117.4,
        "plan": {"reason": "24 processes of 1.5 s a side: between-run CV 3.6%"},
        "runs_a_side": 24,
        "analysis": "paired",
    }
    assert budget_line(budget) == (
        "budget 120 s (117 s spent): 24 processes of 1.5 s a side: between-run CV 3.6%; "
        "24 runs a side compared, paired"
    )
