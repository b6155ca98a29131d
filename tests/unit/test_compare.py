"""compare's verdicts on hand-made runs, and its text (cli/compare_text.py).

Results are made by tests/factories.py with intervals at chosen rates, so every figure here is
known in advance; each run is one value (its median interval rate). The verdict's error rates
on simulated runs are tested in test_verdict.py.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Sequence

import numpy as np
import pytest
import scipy.stats

import factories
from flowrate.cli import compare as cli_compare
from flowrate.cli.compare_text import evidence, rows, to_markdown
from flowrate.results import compare as comparing
from flowrate.results import verdict as verdicts
from flowrate.results.compare import Difference, History, compare
from flowrate.results.metrics import METRICS
from flowrate.results.per_process import process_values
from flowrate.results.schema import Result
from flowrate.results.sections import Repeat, RepeatRun
from flowrate.units import p_value as p_value_text


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


# --- compare(): verdicts over runs (the process is the unit) --------------------------------

NOISY_A = [1000, 1040, 960, 1010, 990, 1030, 970, 1005]


def runs(medians: Sequence[float], prefix: str, spread: Sequence[float] = (0.97, 1.0, 1.03)) -> list[Result]:
    """One run per median: intervals spread around it, so each run's median is exactly it."""
    return [make_result([m * f for f in spread], f"{prefix}{i}") for i, m in enumerate(medians)]


def log_ratio_p(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """(ratio, p, df) of the log-ratio t-test, written out independently with scipy.stats."""
    ma, mb = np.mean(a), np.mean(b)
    qa, qb = np.var(a, ddof=1) / (len(a) * ma**2), np.var(b, ddof=1) / (len(b) * mb**2)
    df = (qa + qb) ** 2 / (qa**2 / (len(a) - 1) + qb**2 / (len(b) - 1))
    t = np.log(mb / ma) / np.sqrt(qa + qb)
    return float(mb / ma), float(2 * scipy.stats.t.sf(abs(t), df)), float(df)


def test_one_run_a_side_gets_a_ratio_and_no_verdict_however_many_intervals() -> None:
    # 8 intervals a side and a 20% gap: pooled intervals called this; one process says nothing of
    # the spread between processes
    a = make_result(NOISY_A, "a1")
    b = make_result([r * 1.2 for r in NOISY_A], "b1")
    m = compare([a], [b]).metric("samples_per_sec")
    assert m is not None and (m.n_a, m.n_b) == (1, 1)
    assert m.ratio == pytest.approx(1.2) and m.relative == pytest.approx(0.2)
    assert (m.verdict, m.p_value, m.ci_low, m.noise_source, m.method) == ("n/a", None, None, None, None)
    assert m.reason.startswith("1 run a side: no spread between runs to judge by; record 3 or more runs")
    assert m.within_cv_a == pytest.approx(statistics.stdev(NOISY_A) / statistics.fmean(NOISY_A))


def test_three_runs_a_side_clearly_faster() -> None:
    a_medians, b_medians = [1000.0, 1010.0, 990.0], [1200.0, 1190.0, 1215.0]
    c = compare(runs(a_medians, "a"), runs(b_medians, "b"))
    m = c.metric("samples_per_sec")
    assert m is not None and (m.n_a, m.n_b) == (3, 3)
    assert m.mean_a == pytest.approx(1000.0) and m.median_b == pytest.approx(1200.0)
    ratio, p, df = log_ratio_p(a_medians, b_medians)
    assert m.ratio == pytest.approx(ratio) and m.p_value == pytest.approx(p)
    half = scipy.stats.t.ppf(0.975, df) * abs(np.log(ratio)) / scipy.stats.t.isf(p / 2, df)
    assert (m.ci_low, m.ci_high) == pytest.approx((ratio * np.exp(-half), ratio * np.exp(half)))
    assert m.verdict == "faster" and m.significant and m.noise_source == "runs"
    assert m.reason == f"p = {p_value_text(p)}, +20.2%"
    assert m.evidence == "3 runs a side, between-run CV 1.0%"  # pooled: 1.00% and 1.05%
    assert m.method == "t-test of the log ratio, Welch (one value per process)"
    reverse = compare(runs(b_medians, "b"), runs(a_medians, "a")).metric("samples_per_sec")
    assert reverse is not None and reverse.verdict == "slower" and reverse.p_value == pytest.approx(p)
    # model FLOP/s moves with samples/s
    flops = c.metric("model_flops_per_sec")
    assert flops is not None and flops.verdict == "faster" and flops.ratio == pytest.approx(ratio)


def test_overlapping_runs_are_within_noise() -> None:
    m = compare(runs([1000, 1040, 960], "a"), runs([990, 1030, 975], "b")).metric("samples_per_sec")
    assert m is not None and m.verdict == "not significant" and not m.significant
    assert m.p_value is not None and m.p_value > 0.5 and m.reason.startswith("within noise (p = ")
    assert m.ci_low is not None and m.ci_high is not None and m.ci_low < 1 < m.ci_high


def test_a_significant_difference_below_the_minimum_effect_is_not_called() -> None:
    steady = [1000.0, 1000.5, 999.5, 1000.2]
    a, b = runs(steady, "a"), runs([r * 1.005 for r in steady], "b")  # +0.5%, far outside the noise
    m = compare(a, b).metric("samples_per_sec")
    assert m is not None and m.p_value is not None and m.p_value < 1e-4
    assert m.verdict == "not significant"
    assert m.reason == "below the minimum effect (+0.50% is under 1.00%)"
    smaller = compare(a, b, min_effect=0.001).metric("samples_per_sec")
    assert smaller is not None and smaller.verdict == "faster"


def test_constant_runs() -> None:
    flat = compare(runs([500.0] * 3, "a"), runs([500.0] * 3, "b")).metric("samples_per_sec")
    assert flat is not None and (flat.verdict, flat.p_value, flat.ratio) == ("not significant", 1.0, 1.0)
    apart = compare(runs([500.0] * 3, "a"), runs([400.0] * 3, "b")).metric("samples_per_sec")
    assert apart is not None
    assert (apart.verdict, apart.p_value) == ("slower", 0.0)
    assert (apart.ci_low, apart.ci_high) == pytest.approx((0.8, 0.8))
    assert apart.reason == "p = 0, -20.0%"


def test_mann_whitney_over_runs() -> None:
    a, b = runs([1000, 1010, 990, 1005], "a"), runs([900, 905, 895, 910], "b")
    m = compare(a, b, test="mannwhitney").metric("samples_per_sec")
    assert m is not None and m.verdict == "slower"
    assert m.p_value == pytest.approx(2 / 70)  # exact: every B below every A, 2 / C(8, 4)
    assert m.method == "Mann–Whitney over per-run values (one value per process)"
    # three runs a side can never reach p < 0.05 by ranks (2 / C(6, 3) = 0.1)
    three = compare(a[:3], b[:3], test="mannwhitney").metric("samples_per_sec")
    assert three is not None and three.verdict == "not significant" and three.p_value == pytest.approx(0.1)
    # one run a side judged by the store's spread: ranks cannot use it, the t-test does
    known = compare(a[:1], b[:1], test="mannwhitney", history=History(0.01, 10)).metric("samples_per_sec")
    assert (
        known is not None and known.method is not None and known.method.startswith("t-test of the log ratio")
    )


def test_a_repeat_result_is_one_value_per_process() -> None:
    a = dataclasses.replace(
        make_result(NOISY_A, "a1"),
        repeat=Repeat(
            n=3,
            runs=[
                RepeatRun(run_id=f"a1-{i}", median_samples_per_sec=v, cv=0.02, intervals=8, mfu=None)
                for i, v in enumerate([1000.0, 1010.0, 990.0])
            ],
        ),
    )
    b = runs([1200.0, 1190.0, 1215.0], "b")
    c = compare([a], b)
    m = c.metric("samples_per_sec")
    assert m is not None and (m.n_a, m.n_b) == (3, 3) and m.mean_a == pytest.approx(1000.0)
    assert m.p_value == pytest.approx(log_ratio_p([1000, 1010, 990], [1200, 1190, 1215])[1])
    # model FLOP/s per process: each process's samples/s times the run's FLOPs per sample
    flops = c.metric("model_flops_per_sec")
    assert (
        flops is not None
        and flops.n_a == 3
        and flops.mean_a == pytest.approx(1000.0 * factories.FLOPS_PER_SAMPLE)
    )
    assert process_values(METRICS["mfu"], a) == []  # the entries hold no MFU: none is made up


def test_history_stands_in_for_a_side_with_too_few_runs() -> None:
    a, b = runs([1000.0], "a"), runs([1040.0], "b")
    known = History(cv=0.01, runs=20)
    m = compare(a, b, history=known).metric("samples_per_sec")
    assert m is not None and m.noise_source == "history"
    se = 0.01 * np.sqrt(2)
    expected = 2 * scipy.stats.t.sf(np.log(1.04) / se, 19)
    assert m.p_value == pytest.approx(expected) and m.verdict == "faster"
    assert (
        m.evidence
        == "1 run a side, between-run CV 1.0% from 20 earlier runs of this configuration on this machine"
    )
    assert m.method == "t-test of the log ratio, known between-run CV (one value per process)"
    # with three runs a side their own spread is pooled with the history's (degrees of freedom 4 + 19)
    own = compare(runs([1000, 1010, 990], "a"), runs([1030, 1040, 1020], "b"), history=known)
    own_m = own.metric("samples_per_sec")
    assert own_m is not None and own_m.noise_source == "runs+history"
    own_var = (np.var([1000, 1010, 990], ddof=1) / 1000**2 + np.var([1030, 1040, 1020], ddof=1) / 1030**2) / 2
    pooled_cv = np.sqrt((4 * own_var + 19 * 0.01**2) / 23)
    pooled_p = 2 * scipy.stats.t.sf(np.log(1030 / 1000) / (pooled_cv * np.sqrt(2 / 3)), 23)
    assert own_m.p_value == pytest.approx(pooled_p)
    assert own_m.method == "t-test of the log ratio, pooled between-run CV (one value per process)"
    # … unless they are noisier than the history by more than its F-test allows: their own alone
    noisy = compare(runs([1000, 1100, 900], "a"), runs([1030, 1130, 930], "b"), history=known)
    noisy_m = noisy.metric("samples_per_sec")
    assert noisy_m is not None and noisy_m.noise_source == "runs"
    assert noisy_m.evidence.endswith("(above the 1.0% of 20 earlier runs: not pooled with them)")
    # two runs a side: history, but never below the spread the runs show themselves
    wide = compare(runs([1000, 1100], "a"), runs([1030, 1130], "b"), history=known).metric("samples_per_sec")
    assert wide is not None and wide.noise_source == "history" and wide.verdict == "not significant"
    assert wide.evidence == (
        "2 runs a side, between-run CV 6.6% (their own: above the 1.0% of 20 earlier runs of this "
        "configuration on this machine)"
    )
    # figures not proportional to samples/s do not borrow its noise
    with_memory = [make_result(NOISY_A, "a9", rss=100_000_000)], [make_result(NOISY_A, "b9", rss=90_000_000)]
    memory = compare(*with_memory, history=known).metric("peak_memory_bytes")
    assert memory is not None and memory.verdict == "n/a"


def test_a_per_run_metric_needs_several_runs_per_side() -> None:
    # peak memory is one number per run (no per-interval reading)
    a = make_result(NOISY_A, "a1", rss=100_000_000)
    b = make_result(NOISY_A, "b1", rss=120_000_000)
    m = compare([a], [b]).metric("peak_memory_bytes")
    assert m is not None and (m.n_a, m.n_b) == (1, 1)
    assert m.ratio == pytest.approx(1.2)
    assert m.verdict == "n/a" and m.reason.startswith("1 run a side: no spread between runs")
    # three runs per side: a test over the runs' values; more memory is worse
    a_runs = [make_result(NOISY_A, f"a{i}", rss=v) for i, v in enumerate([100e6, 101e6, 99e6])]
    b_runs = [make_result(NOISY_A, f"b{i}", rss=v) for i, v in enumerate([120e6, 121e6, 119e6])]
    m3 = compare(a_runs, b_runs).metric("peak_memory_bytes")
    assert m3 is not None and (m3.n_a, m3.n_b) == (3, 3)
    assert m3.p_value == pytest.approx(log_ratio_p([100e6, 101e6, 99e6], [120e6, 121e6, 119e6])[1])
    assert m3.verdict == "worse"
    # uneven: one run against three
    m13 = compare([a], b_runs).metric("peak_memory_bytes")
    assert m13 is not None and m13.verdict == "n/a" and m13.reason.startswith("1 run of A, 3 of B: ")


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
    assert c.machine_mismatch == [Difference("device_name", "Test CPU", "NVIDIA H100 80GB HBM3")]
    assert "environments differ: device_name: 'Test CPU' vs 'NVIDIA H100 80GB HBM3'" in c.warnings
    same = compare([a], [make_result(NOISY_A, "b2")])
    assert (
        same.environment_differences == same.problem_mismatch == same.machine_mismatch == same.warnings == []
    )
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
        make_result(NOISY_A, "b1"), batch_size=64, config=dataclasses.replace(a.config, precision="bf16")
    )
    c = compare([a], [b])
    assert c.configuration_differences == [
        Difference("batch_size", 8, 64),
        Difference("precision", "fp32", "bf16"),
    ]
    assert c.warnings == []


def test_markdown_is_a_pipe_table_with_its_warnings_and_evidence() -> None:
    a = runs([1000, 1010, 990], "a")
    b = [make_result([r * 0.8 for r in (970, 1000, 1030)], f"b{i}", device_name="other") for i in range(3)]
    c = compare(a, b, labels=("main", "pr-42"))
    text = to_markdown(c)
    lines = text.splitlines()
    table = [line for line in lines if line.startswith("|")]
    assert (
        table[0]
        == "| metric | main mean (median) | pr-42 mean (median) | runs A / B | B/A [95% CI] | p | verdict |"
    )
    assert table[1] == "|---|---:|---:|---:|---:|---:|---|"
    samples = table[2].split(" | ")
    assert samples[0] == "| samples/s" and samples[1] == "1k (1k)" and samples[3] == "3 / 3"
    assert samples[4].startswith("0.800× (-20.0%) [0.")
    assert samples[-1] == "slower |"
    assert all(line.count("|") == table[0].count("|") for line in table)
    assert "- environments differ: device_name: 'Test CPU' vs 'other'" in lines
    assert "**A** (baseline): main — 3 runs: a0, a1, a2  " in lines
    assert (
        "- samples/s, model FLOP/s: 3 runs a side, between-run CV 0.7%; t-test of the log ratio, Welch "
        "(one value per process)"
    ) in lines
    assert evidence(c) == [lines[-5][2:]]


def test_to_dict_is_strict_json() -> None:
    c = compare(runs([500.0] * 3, "a"), runs([400.0] * 3, "b"), history=History(0.02, 10))
    data = json.loads(json.dumps(c.to_dict(), allow_nan=False))
    m = data["metrics"][0]
    assert m["metric"] == "samples_per_sec" and m["verdict"] == "slower" and m["significant"] is True
    assert (m["n_a"], m["noise_source"]) == (3, "runs+history") and m["p_value"] < 1e-6
    assert m["evidence"] == (
        "3 runs a side, between-run CV 1.7%: their own 0.0% pooled with the 2.0% of 10 earlier runs "
        "of this configuration on this machine"
    )
    assert data["test"] == "welch" and data["alpha"] == 0.05 and data["min_effect"] == 0.01
    assert data["history"] == {"cv": 0.02, "runs": 10, "block_cv": None, "block_df": 0}
    one = compare(runs([500.0], "a"), runs([400.0], "b")).to_dict()
    assert one["metrics"][0]["ci_low"] is None and one["history"] is None


def test_bad_arguments() -> None:
    a = make_result(NOISY_A, "a1")
    with pytest.raises(ValueError, match="test must be"):
        compare([a], [a], test="ks")
    with pytest.raises(ValueError, match="at least one run"):
        compare([], [a])


def test_the_command_offers_what_the_library_does() -> None:
    assert cli_compare.TESTS == comparing.TESTS == verdicts.TESTS
    assert cli_compare.MIN_OWN_RUNS == verdicts.MIN_OWN_RUNS
    assert cli_compare.DEFAULT_ALPHA == comparing.DEFAULT_ALPHA
    assert cli_compare.DEFAULT_MIN_EFFECT_PCT == comparing.DEFAULT_MIN_EFFECT * 100
