"""`flowrate compare A B` end to end: runs chosen by id, tag or file, each run one value; table,
Markdown and JSON with the runs per side and the evidence; the store's noise standing in for a
side with too few runs; --fail-if-slower for CI; runs of different problems refused unless
forced; environments flagged.

Most runs are hand-made results (tests/factories.py, with chosen interval
rates) put straight into the store, so every verdict is known in advance; one test records two
real tiny runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

import factories
from flowrate.results.schema import Result
from flowrate.results.store import Store

BASELINE = [1000, 1040, 960, 1010, 990, 1030, 970, 1005]
# per-run medians of three runs a side; each run's intervals spread ±3% around its median
MAIN = [1000.0, 1012.0, 991.0]
SLOWER = [r * 0.8 for r in MAIN]  # 20% slower, far outside the noise between runs
NOISY_LOWER = [995.0, 1008.0, 985.0]  # lower on average, within the noise between runs
SPREAD = (0.97, 1.0, 1.03)


def make_result(
    rates: Sequence[float],
    run_id: str,
    *,
    device_name: str = "Test CPU",
    size: str = "debug",
    commit: str | None = None,
) -> Result:
    code = {"flowrate": {"version": "0.1.0", "commit": commit, "dirty": False}}
    return factories.make_result(
        interval_rates=rates, run_id=run_id, device_name=device_name, size=size, environment=code
    )


def add_runs(opened: Store, medians: Sequence[float], prefix: str, tag: str) -> None:
    """Runs of one commit (each tag's code is its own), one per median."""
    for i, median in enumerate(medians):
        opened.add(make_result([median * f for f in SPREAD], f"{prefix}{i:04d}", commit=tag), [tag])


@pytest.fixture
def store(results_store: Path) -> Path:
    """The test's store with three runs each tagged main, pr (20% slower) and noisy (within the
    noise), two runs tagged pair, a run on another device and a run of another size."""
    with Store(results_store) as opened:
        add_runs(opened, MAIN, "aaaa", "main")
        add_runs(opened, SLOWER, "bbbb", "pr")
        add_runs(opened, NOISY_LOWER, "cccc", "noisy")
        opened.add(make_result(BASELINE[:4], "dddd0001", commit="main"), ["pair"])
        opened.add(make_result(BASELINE[4:], "dddd0002", commit="main"), ["pair"])
        opened.add(make_result(BASELINE, "eeee0001", device_name="NVIDIA H100 80GB HBM3"), ["h100"])
        opened.add(make_result(BASELINE, "ffff0001", size="small"), ["small"])
    return results_store


def test_compare_by_tag_prints_a_table_with_runs_and_evidence(run_cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("compare", "main", "pr", "--no-history")
    assert outcome.code == 0, outcome.stderr
    row = next(line for line in outcome.stdout.splitlines() if "samples/s" in line)
    assert "0.800× (-20.0%) [0." in row and "3 / 3" in row and "slower" in row
    assert "aaaa0000" in outcome.stdout and "bbbb0000" in outcome.stdout
    assert "warning" not in outcome.stderr
    assert "the log-ratio t-test gives p < 0.05" in outcome.stderr
    assert (
        "samples/s, model FLOP/s: 3 runs a side, between-run CV 1.1%; t-test of the log ratio"
        in outcome.stderr
    )


def test_one_run_a_side_has_no_verdict_and_says_how_to_get_one(run_cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("compare", "aaaa0000", "bbbb0000", "--no-history", "--format", "json")
    assert outcome.code == 0, outcome.stderr
    m = outcome.json()["metrics"][0]
    assert (m["n_a"], m["n_b"], m["verdict"], m["p_value"]) == (1, 1, "n/a", None)
    assert m["ratio"] == pytest.approx(0.8) and "record 3 or more runs" in m["reason"]
    # --fail-if-slower cannot test it: says so, does not fail
    gate = run_cli("compare", "aaaa0000", "bbbb0000", "--no-history", "--fail-if-slower", "5")
    assert gate.code == 0 and "--fail-if-slower: samples/s could not be tested (1 run a side" in gate.stderr


def test_one_run_a_side_uses_the_stores_noise_and_says_so(run_cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    # the store holds other runs of this configuration on this machine, at three commits: 2 + 2
    # of main's (pair's too), 2 of pr's, 3 of noisy's: 3 + 1 + 2 degrees of freedom, pooled
    outcome = run_cli("compare", "aaaa0000", "bbbb0000", "--format", "json")
    assert outcome.code == 0, outcome.stderr
    data = outcome.json()
    m = data["metrics"][0]
    assert m["noise_source"] == "history" and m["verdict"] == "slower"
    assert data["history"]["runs"] == 7
    assert m["evidence"].startswith("1 run a side, between-run CV ")
    assert m["evidence"].endswith(" from 7 earlier runs of this configuration on this machine")


def test_compare_by_tag_of_two_runs_counts_two_runs(run_cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("compare", "pair", "main", "--format", "json")
    assert outcome.code == 0, outcome.stderr
    data = outcome.json()
    assert sorted(data["a_runs"]) == ["dddd0001", "dddd0002"] and len(data["b_runs"]) == 3
    m = data["metrics"][0]
    assert m["metric"] == "samples_per_sec" and (m["n_a"], m["n_b"]) == (2, 3)
    assert m["noise_source"] == "history"  # two runs are too few to show their own spread


def test_compare_result_files(run_cli, store: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    make_result(BASELINE, "file0001").save(a)
    make_result([r * 0.8 for r in BASELINE], "file0002").save(b)
    outcome = run_cli("compare", str(a), str(b), "--format", "json")
    assert outcome.code == 0, outcome.stderr
    data = outcome.json()
    assert data["a_runs"] == ["file0001"] and data["a_label"] == str(a)
    assert data["metrics"][0]["verdict"] == "slower"  # judged by the store's noise
    # a file against stored runs
    mixed = run_cli("compare", str(a), "main", "--format", "json")
    assert mixed.code == 0 and mixed.json()["metrics"][0]["verdict"] == "not significant"


def test_markdown_output_is_a_pipe_table(run_cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("compare", "main", "h100", "--format", "md", "--force")
    assert outcome.code == 0, outcome.stderr
    lines = outcome.stdout.splitlines()
    assert "| metric | main mean (median) | h100 mean (median) |" in outcome.stdout
    assert "|---|---:|---:|---:|---:|---:|---|" in lines
    assert any(line.startswith("| samples/s |") for line in lines)
    # the warnings go into the Markdown too, so a pasted report is complete
    assert "- environments differ: device_name: 'Test CPU' vs 'NVIDIA H100 80GB HBM3'" in lines


def test_a_different_machine_is_refused_unless_forced_and_then_flagged(run_cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    refused = run_cli("compare", "main", "h100")
    assert refused.code == 2 and refused.stdout == "" and refused.stderr.count("\n") == 1
    assert (
        "A and B are runs on different machines (device_name: 'Test CPU' vs 'NVIDIA H100 80GB HBM3'); "
        "use --force to compare anyway" in refused.stderr
    )
    outcome = run_cli("compare", "main", "h100", "--force")
    assert outcome.code == 0, outcome.stderr
    assert (
        "warning: environments differ: device_name: 'Test CPU' vs 'NVIDIA H100 80GB HBM3'" in outcome.stderr
    )
    # both at once: one line naming both
    both = run_cli("compare", "small", "h100")
    assert both.code == 2 and both.stderr.count("\n") == 1
    assert (
        "A and B are runs of different problems (size: 'small' vs 'debug') and runs on different machines"
        in both.stderr
    )


def test_fail_if_slower(run_cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    slower = run_cli("compare", "main", "pr", "--fail-if-slower", "5")
    assert slower.code == 1
    errors = [line for line in slower.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert "pr is significantly slower than main: samples/s -20.0% (p = " in errors[0]
    # the store holds 4 earlier runs of main's configuration: their noise is pooled with the runs' own
    assert (
        "; 3 runs a side, between-run CV 1.0%: their own 1.1% pooled with the 1.0% of 4 earlier runs of "
        "this configuration on this machine), more than the 5% --fail-if-slower allows" in errors[0]
    )
    assert "samples/s" in slower.stdout  # the table is printed before failing
    # a 20% drop is within a 25% allowance
    assert run_cli("compare", "main", "pr", "--fail-if-slower", "25").code == 0
    # lower, but not significantly: passes
    noisy = run_cli("compare", "main", "noisy", "--fail-if-slower", "0", "--format", "json")
    assert noisy.code == 0, noisy.stderr
    assert noisy.json()["metrics"][0]["verdict"] == "not significant"
    assert noisy.json()["metrics"][0]["ratio"] < 1
    # faster never fails
    assert run_cli("compare", "pr", "main", "--fail-if-slower", "0").code == 0


def test_different_problems_are_refused_unless_forced(run_cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    refused = run_cli("compare", "main", "small")
    assert refused.code == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1
    assert "different problems (size: 'debug' vs 'small'); use --force to compare anyway" in refused.stderr
    forced = run_cli("compare", "main", "small", "--force")
    assert forced.code == 0, forced.stderr
    assert "warning: different problems: size: 'debug' vs 'small'" in forced.stderr


def test_bad_references_and_options(run_cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    missing = run_cli("compare", "main", "nosuchtag")
    assert missing.code == 2 and "'nosuchtag' is no run id, tag or result file" in missing.stderr
    assert run_cli("compare", "main", "pr", "--test", "ks").code == 2
    assert run_cli("compare", "main", "pr", "--alpha", "1.5").code == 2
    assert run_cli("compare", "main").code == 2


def test_mann_whitney_and_minimum_effect_options(run_cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    mw = run_cli("compare", "main", "pr", "--test", "mannwhitney", "--format", "json")
    assert mw.code == 0, mw.stderr
    m = mw.json()["metrics"][0]
    assert mw.json()["test"] == "mannwhitney" and m["method"].startswith("Mann–Whitney over per-run values")
    # three runs a side: ranks alone cannot get under p = 2 / C(6, 3) = 0.1
    assert m["verdict"] == "not significant" and m["p_value"] == pytest.approx(0.1)
    # a minimum effect above the 20% drop: not called
    big = run_cli("compare", "main", "pr", "--min-effect", "25", "--format", "json")
    assert big.json()["metrics"][0]["verdict"] == "not significant"
    assert big.json()["metrics"][0]["reason"] == "below the minimum effect (-20.00% is under 25.00%)"


def test_two_real_runs(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "second.json"
    tiny = ("-p", "fc_mnist", "--size", "debug", "--device", "cpu", "--preheat", "1", "--steps", "6",
            "--sample-every", "2", "--quiet")  # fmt: skip
    assert run_cli("run", *tiny, "--tag", "first").code == 0
    assert run_cli("run", *tiny, "--tag", "second", "--out", str(out)).code == 0
    for b in ("second", str(out)):
        outcome = run_cli("compare", "first", b, "--format", "json")
        assert outcome.code == 0, outcome.stderr
        data = outcome.json()
        names = [m["metric"] for m in data["metrics"]]
        assert names[:2] == ["samples_per_sec", "model_flops_per_sec"]
        assert data["metrics"][0]["n_a"] == data["metrics"][0]["n_b"] == 1  # one process a side
        assert data["problem_mismatch"] == [] and data["environment_differences"] == []
    assert json.loads(out.read_text())["run_id"] == data["b_runs"][0]
