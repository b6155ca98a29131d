"""compare's verdicts on hand-made runs, and its text (cli/compare_text.py).

Results are made by tests/factories.py with intervals at chosen rates, so every figure here is
known in advance. The tests of significance themselves are tested in test_stats.py.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import pytest
import scipy.stats

import factories
from flowrate.cli import compare as cli_compare
from flowrate.cli.compare_text import rows, to_markdown
from flowrate.results import compare as comparing
from flowrate.results.compare import Difference, compare
from flowrate.results.schema import Result


def make_result(
    rates: Sequence[float],
    run_id: str,
    *,
    rss: int | None = None,
    device_name: str = "Test CPU",
    size: str = "debug",
    samples_per_joule: float | None = None,
) -> Result:
    """A result whose compute intervals ran at ``rates`` samples/s (its summary agrees)."""
    return factories.make_result(
        interval_rates=rates,
        run_id=run_id,
        peak_memory_bytes=rss,
        device_name=device_name,
        size=size,
        samples_per_joule=samples_per_joule,
    )


# --- compare(): verdicts on runs --------------------------------------------------------------

NOISY_A = [1000, 1040, 960, 1010, 990, 1030, 970, 1005]


def test_a_clearly_faster_b_is_called_faster() -> None:
    a = make_result(NOISY_A, "a1")
    b = make_result([r * 1.2 for r in NOISY_A], "b1")
    c = compare([a], [b])
    m = c.metric("samples_per_sec")
    assert m is not None
    assert m.source == "intervals" and (m.n_a, m.n_b) == (8, 8)
    assert m.mean_a == pytest.approx(1000.625) and m.mean_b == pytest.approx(1.2 * 1000.625)
    assert m.median_a == pytest.approx(1002.5)
    assert m.ratio == pytest.approx(1.2) and m.relative == pytest.approx(0.2)
    expected = scipy.stats.ttest_ind([r * 1.2 for r in NOISY_A], NOISY_A, equal_var=False)
    assert m.statistic == pytest.approx(expected.statistic) and m.p_value == pytest.approx(expected.pvalue)
    ci = expected.confidence_interval(0.95)
    assert (m.ci_low, m.ci_high) == pytest.approx((ci.low, ci.high))
    assert m.verdict == "faster" and m.significant and m.p_value < 1e-6
    assert m.reason.endswith("+20.0%")
    # model FLOP/s moves with samples/s, interval by interval
    flops = c.metric("model_flops_per_sec")
    assert flops is not None and flops.verdict == "faster" and flops.ratio == pytest.approx(1.2)
    reverse = compare([b], [a]).metric("samples_per_sec")
    assert reverse is not None and reverse.verdict == "slower"
    assert reverse.relative == pytest.approx(1 / 1.2 - 1)


def test_an_overlapping_noisy_pair_is_not_significant() -> None:
    a = make_result(NOISY_A, "a1")
    b = make_result([990, 1030, 955, 1020, 985, 1000, 965, 1012], "b1")  # 0.2% lower on average
    m = compare([a], [b]).metric("samples_per_sec")
    assert m is not None
    assert m.verdict == "not significant" and not m.significant
    assert m.p_value is not None and m.p_value > 0.5
    assert m.reason.startswith("within noise (p = ")
    assert m.ci_low is not None and m.ci_high is not None and m.ci_low < 0 < m.ci_high


def test_a_significant_difference_below_the_minimum_effect_is_not_called() -> None:
    steady = [1000.0, 1000.5, 999.5, 1000.2, 999.8, 1000.1, 999.9, 1000.0]
    a = make_result(steady, "a1")
    b = make_result([r * 1.005 for r in steady], "b1")  # +0.5%, far outside the noise
    m = compare([a], [b]).metric("samples_per_sec")
    assert m is not None and m.p_value is not None and m.p_value < 1e-6
    assert m.verdict == "not significant"
    assert m.reason == "below the minimum effect (+0.50% is under 1.00%)"
    smaller = compare([a], [b], min_effect=0.001).metric("samples_per_sec")
    assert smaller is not None and smaller.verdict == "faster"


def test_constant_samples() -> None:
    flat = compare([make_result([500.0] * 4, "a1")], [make_result([500.0] * 4, "b1")])
    m = flat.metric("samples_per_sec")
    assert m is not None and (m.verdict, m.p_value, m.ratio, m.statistic) == (
        "not significant",
        1.0,
        1.0,
        None,
    )
    apart = compare([make_result([500.0] * 4, "a1")], [make_result([400.0] * 4, "b1")]).metric(
        "samples_per_sec"
    )
    assert apart is not None
    assert (apart.verdict, apart.p_value, apart.ci_low, apart.ci_high) == ("slower", 0.0, -100.0, -100.0)
    assert apart.reason == "p = 0, -20.0%"
    # Mann–Whitney over constants: ranks tie within each side, the test still runs
    mw = compare([make_result([500.0] * 10, "a1")], [make_result([400.0] * 10, "b1")], test="mannwhitney")
    mwm = mw.metric("samples_per_sec")
    assert mwm is not None and mwm.verdict == "slower" and mwm.statistic == 0.0
    assert mwm.p_value == pytest.approx(scipy.stats.mannwhitneyu([400] * 10, [500] * 10).pvalue)


def test_one_interval_per_side_gets_a_ratio_and_no_test() -> None:
    m = compare([make_result([100.0], "a1")], [make_result([150.0], "b1")]).metric("samples_per_sec")
    assert m is not None and m.ratio == pytest.approx(1.5)
    assert (m.verdict, m.p_value, m.ci_low) == ("n/a", None, None)
    assert "one value per side" in m.reason


def test_a_tag_pools_the_intervals_of_its_runs() -> None:
    a_runs = [make_result([1000, 1010, 990], "a1"), make_result([1020, 980], "a2")]
    b = make_result([1100, 1120, 1090, 1105], "b1")
    pooled = compare(a_runs, [b])
    one = compare([make_result([1000, 1010, 990, 1020, 980], "a")], [b])
    m, expected = pooled.metric("samples_per_sec"), one.metric("samples_per_sec")
    assert m is not None and expected is not None
    assert m.n_a == 5 and m.mean_a == pytest.approx(1000.0)
    assert (m.statistic, m.df, m.p_value, m.ci_low) == pytest.approx(
        (expected.statistic, expected.df, expected.p_value, expected.ci_low)
    )
    assert pooled.a_runs == ["a1", "a2"] and pooled.b_runs == ["b1"]


def test_a_per_run_metric_needs_several_runs_per_side() -> None:
    # peak memory is one number per run (no per-interval reading)
    a = make_result(NOISY_A, "a1", rss=100_000_000)
    b = make_result(NOISY_A, "b1", rss=120_000_000)
    m = compare([a], [b]).metric("peak_memory_bytes")
    assert m is not None and m.source == "runs" and (m.n_a, m.n_b) == (1, 1)
    assert m.ratio == pytest.approx(1.2)
    assert m.verdict == "n/a" and m.reason == "one value per side; a test needs 2 runs or more a side"
    # three runs per side: a test over the runs' values; more memory is worse
    a_runs = [make_result(NOISY_A, f"a{i}", rss=v) for i, v in enumerate([100e6, 101e6, 99e6])]
    b_runs = [make_result(NOISY_A, f"b{i}", rss=v) for i, v in enumerate([120e6, 121e6, 119e6])]
    m3 = compare(a_runs, b_runs).metric("peak_memory_bytes")
    assert m3 is not None and (m3.n_a, m3.n_b) == (3, 3)
    assert m3.p_value == pytest.approx(
        scipy.stats.ttest_ind([120e6, 121e6, 119e6], [100e6, 101e6, 99e6], equal_var=False).pvalue
    )
    assert m3.verdict == "worse"
    # uneven: one run against three
    m13 = compare([a], b_runs).metric("peak_memory_bytes")
    assert m13 is not None and m13.verdict == "n/a" and "(1 in A, 3 in B)" in m13.reason


def test_results_without_per_interval_figures_fall_back_to_the_runs_figures() -> None:
    # a result of schema 1 has no model FLOP/s per interval: both sides then use the run's figure
    def without_interval_flops(result: Result) -> Result:
        intervals = [dataclasses.replace(i, model_flops_per_sec=None) for i in result.intervals]
        return dataclasses.replace(result, intervals=intervals)

    a = make_result(NOISY_A, "a1")
    b = without_interval_flops(make_result(NOISY_A, "b1"))
    m = compare([a], [b]).metric("model_flops_per_sec")
    assert m is not None and m.source == "runs" and (m.n_a, m.n_b) == (1, 1)
    assert m.mean_a == a.summary.model_flops_per_sec and m.verdict == "n/a"
    assert rows(compare([a], [b]))[1][0] == "model FLOP/s (per run)"


def test_metrics_absent_on_both_sides_are_skipped_and_on_one_side_say_so() -> None:
    a = make_result(NOISY_A, "a1", samples_per_joule=50.0)
    b = make_result(NOISY_A, "b1")
    c = compare([a], [b])
    names = [m.metric for m in c.metrics]
    assert "tokens_per_sec" not in names and "mfu" not in names and "final_loss" not in names
    energy = c.metric("samples_per_joule")
    assert energy is not None
    assert (energy.verdict, energy.reason, energy.n_a, energy.n_b) == ("n/a", "not recorded in B", 1, 0)
    assert energy.mean_a == 50.0 and energy.mean_b is None and energy.ratio is None
    row = rows(c)[names.index("samples_per_joule")]
    assert row[2] == "—" and row[4] == "—" and row[-1] == "n/a: not recorded in B"


def test_environment_and_problem_differences() -> None:
    a = make_result(NOISY_A, "a1")
    b = make_result(NOISY_A, "b1", device_name="NVIDIA H100 80GB HBM3", size="small")
    c = compare([a], [b])
    assert c.environment_differences == [Difference("device_name", "Test CPU", "NVIDIA H100 80GB HBM3")]
    assert str(c.environment_differences[0]) == "device_name: 'Test CPU' vs 'NVIDIA H100 80GB HBM3'"
    assert c.problem_mismatch == [Difference("size", "debug", "small")]
    assert "environments differ: device_name: 'Test CPU' vs 'NVIDIA H100 80GB HBM3'" in c.warnings
    same = compare([a], [make_result(NOISY_A, "b2")])
    assert same.environment_differences == [] and same.problem_mismatch == [] and same.warnings == []
    # runs within one side that differ are flagged too
    mixed = compare([a, make_result(NOISY_A, "a2", device_name="other")], [make_result(NOISY_A, "b2")])
    assert mixed.environment_differences == []
    assert mixed.notes == ["runs of A differ among themselves: device_name: 'Test CPU' vs 'other' (a1 vs a2)"]
    # a side that pools runs of different problems is a mismatch too
    pooled = compare([a, make_result(NOISY_A, "a2", size="small")], [make_result(NOISY_A, "b2")])
    assert pooled.problem_mismatch == [Difference("size (within A)", "debug", "small")]


def test_configuration_differences_are_listed_not_warned() -> None:
    a = make_result(NOISY_A, "a1")
    b = dataclasses.replace(
        make_result(NOISY_A, "b1"), batch_size=64, config={**a.config, "precision": "bf16"}
    )
    c = compare([a], [b])
    assert c.configuration_differences == [
        Difference("batch_size", 8, 64),
        Difference("precision", "fp32", "bf16"),
    ]
    assert c.warnings == []


def test_markdown_is_a_pipe_table_with_its_warnings() -> None:
    a = make_result(NOISY_A, "a1")
    b = make_result([r * 0.8 for r in NOISY_A], "b1", device_name="other")
    text = to_markdown(compare([a], [b], labels=("main", "pr-42")))
    lines = text.splitlines()
    table = [line for line in lines if line.startswith("|")]
    assert table[0] == (
        "| metric | main mean (median) | pr-42 mean (median) | n A / B | B/A | B − A [95% CI] | p (Welch) "
        "| verdict |"
    )
    assert table[1] == "|---|---:|---:|---:|---:|---:|---:|---|"
    samples = table[2].split(" | ")
    assert samples[0] == "| samples/s" and samples[1] == "1.001k (1.002k)" and samples[4] == "0.800× (-20.0%)"
    assert samples[-1] == "slower |"
    assert all(line.count("|") == table[0].count("|") for line in table)
    assert "- environments differ: device_name: 'Test CPU' vs 'other'" in lines
    assert "**A** (baseline): main — 1 run: a1  " in lines


def test_to_dict_is_strict_json() -> None:
    c = compare([make_result([500.0] * 4, "a1")], [make_result([400.0] * 4, "b1")])
    data = json.loads(json.dumps(c.to_dict(), allow_nan=False))
    m = data["metrics"][0]
    assert m["metric"] == "samples_per_sec" and m["verdict"] == "slower" and m["significant"] is True
    assert m["statistic"] is None and m["p_value"] == 0.0
    assert data["test"] == "welch" and data["alpha"] == 0.05 and data["min_effect"] == 0.01


def test_bad_arguments() -> None:
    a = make_result(NOISY_A, "a1")
    with pytest.raises(ValueError, match="test must be"):
        compare([a], [a], test="ks")
    with pytest.raises(ValueError, match="at least one run"):
        compare([], [a])


def test_the_command_offers_what_the_library_does() -> None:
    assert cli_compare.TESTS == comparing.TESTS
    assert cli_compare.DEFAULT_ALPHA == comparing.DEFAULT_ALPHA
    assert cli_compare.DEFAULT_MIN_EFFECT_PCT == comparing.DEFAULT_MIN_EFFECT * 100
