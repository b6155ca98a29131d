"""`flowrate compare A B` end to end: runs chosen by id, tag or file; table, Markdown and JSON;
--fail-if-slower for CI; runs of different problems refused unless forced; environments flagged.

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
SLOWER = [r * 0.8 for r in BASELINE]  # 20% slower, far outside the noise
NOISY_LOWER = [990, 1030, 955, 1020, 985, 1000, 965, 1012]  # lower on average, within the noise


def make_result(
    rates: Sequence[float], run_id: str, *, device_name: str = "Test CPU", size: str = "debug"
) -> Result:
    return factories.make_result(interval_rates=rates, run_id=run_id, device_name=device_name, size=size)


@pytest.fixture
def store(results_store: Path) -> Path:
    """The test's store with: base (tag main), slow (tag pr), noisy (tag noisy), two runs tagged
    pair, a run on another device and a run of another size."""
    with Store(results_store) as opened:
        opened.add(make_result(BASELINE, "aaaa0001"), ["main"])
        opened.add(make_result(SLOWER, "bbbb0001"), ["pr"])
        opened.add(make_result(NOISY_LOWER, "cccc0001"), ["noisy"])
        opened.add(make_result(BASELINE[:4], "dddd0001"), ["pair"])
        opened.add(make_result(BASELINE[4:], "dddd0002"), ["pair"])
        opened.add(make_result(BASELINE, "eeee0001", device_name="NVIDIA H100 80GB HBM3"), ["h100"])
        opened.add(make_result(BASELINE, "ffff0001", size="small"), ["small"])
    return results_store


def test_compare_by_run_id_prints_a_table(run_cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("compare", "aaaa0001", "bbbb0001")
    assert outcome.code == 0, outcome.stderr
    row = next(line for line in outcome.stdout.splitlines() if "samples/s" in line)
    assert "0.800× (-20.0%)" in row and "slower" in row
    assert "aaaa0001" in outcome.stdout and "bbbb0001" in outcome.stdout
    assert "warning" not in outcome.stderr
    assert "Welch's t-test gives p < 0.05" in outcome.stderr


def test_compare_by_tag_pools_the_runs_of_a_tag(run_cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("compare", "pair", "main", "--format", "json")
    assert outcome.code == 0, outcome.stderr
    data = outcome.json()
    assert sorted(data["a_runs"]) == ["dddd0001", "dddd0002"] and data["b_runs"] == ["aaaa0001"]
    m = data["metrics"][0]
    assert m["metric"] == "samples_per_sec" and (m["n_a"], m["n_b"]) == (8, 8)
    # the pair's intervals are the baseline's, split in two: the same numbers on both sides
    assert m["mean_a"] == pytest.approx(m["mean_b"]) and m["ratio"] == pytest.approx(1.0)
    assert m["verdict"] == "not significant" and m["p_value"] == pytest.approx(1.0)


def test_compare_result_files(run_cli, store: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    make_result(BASELINE, "file0001").save(a)
    make_result(SLOWER, "file0002").save(b)
    outcome = run_cli("compare", str(a), str(b), "--format", "json")
    assert outcome.code == 0, outcome.stderr
    data = outcome.json()
    assert data["a_runs"] == ["file0001"] and data["a_label"] == str(a)
    assert data["metrics"][0]["verdict"] == "slower"
    # a file against a stored run
    mixed = run_cli("compare", str(a), "main", "--format", "json")
    assert mixed.code == 0 and mixed.json()["metrics"][0]["verdict"] == "not significant"


def test_markdown_output_is_a_pipe_table(run_cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("compare", "main", "h100", "--format", "md")
    assert outcome.code == 0, outcome.stderr
    lines = outcome.stdout.splitlines()
    assert "| metric | main mean (median) | h100 mean (median) |" in outcome.stdout
    assert "|---|---:|---:|---:|---:|---:|---:|---|" in lines
    assert any(line.startswith("| samples/s |") for line in lines)
    # the warnings go into the Markdown too, so a pasted report is complete
    assert "- environments differ: device_name: 'Test CPU' vs 'NVIDIA H100 80GB HBM3'" in lines


def test_a_different_environment_is_flagged(run_cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("compare", "main", "h100")
    assert outcome.code == 0, outcome.stderr
    assert (
        "warning: environments differ: device_name: 'Test CPU' vs 'NVIDIA H100 80GB HBM3'" in outcome.stderr
    )


def test_fail_if_slower(run_cli, store: Path) -> None:  # type: ignore[no-untyped-def]
    slower = run_cli("compare", "main", "pr", "--fail-if-slower", "5")
    assert slower.code == 1
    errors = [line for line in slower.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert "pr is significantly slower than main: samples/s -20.0%" in errors[0]
    assert "more than the 5% --fail-if-slower allows" in errors[0]
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
    assert mw.json()["test"] == "mannwhitney" and m["verdict"] == "slower"
    assert m["statistic"] == 0.0 and m["p_value"] == pytest.approx(2 / 12870)  # exact: 2 / C(16, 8)
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
        assert data["metrics"][0]["n_a"] == data["metrics"][0]["n_b"] == 3
        assert data["problem_mismatch"] == [] and data["environment_differences"] == []
    assert json.loads(out.read_text())["run_id"] == data["b_runs"][0]
