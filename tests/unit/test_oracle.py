"""The oracle view: configurations pooled from runs, their uncertainty, and the noise-aware frontier
per value of an axis, on hand-made runs whose answer is known."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from typing import Any

import pytest
from matplotlib.collections import PathCollection
from matplotlib.container import ErrorbarContainer
from scipy.special import stdtrit

from factories import make_result
from flowrate.analysis.oracle import (
    ConfigPoint,
    Estimate,
    PooledSpread,
    estimate,
    noise_dominates,
    oracle_view,
    pooled_spread,
    significant,
)
from flowrate.analysis.pareto import parse_objective
from flowrate.analysis.plots_pareto import oracle_scatter
from flowrate.cli import pareto_text
from flowrate.errors import FlowrateError
from flowrate.results.codec import encode
from flowrate.results.configs import config_from
from flowrate.results.store import StoredRun

STEADY = (1.0, 1.0, 1.0, 1.0, 1.0)  # intervals without spread: the within-run half-width is 0


def run(
    name: str, rate: float, memory: int = 100, spread: tuple[float, ...] = STEADY, **config: Any
) -> StoredRun:
    options = {"precision": "fp32", "batch_size": 8, **config}
    result = make_result(
        rate,
        interval_rates=[rate * f for f in spread],
        batch_size=options.pop("batch_size"),
        precision=options["precision"],
        peak_memory_bytes=memory,
        run_id=name,
    )
    config = config_from(result.kind, {**encode(result.config), **options})
    return StoredRun.from_result(replace(result, config=config))


def point(*estimates: Estimate) -> ConfigPoint:
    return ConfigPoint("p", {}, (), estimates)


def test_a_difference_counts_when_it_exceeds_the_half_width_of_the_difference() -> None:
    # 10 apart, half-widths 5 and 5: the difference's half-width is 5·√2 ≈ 7.07 < 10, significant
    # (the sum 5 + 5 = 10 would not call it); at 8 and 8 (≈ 11.3) it is noise
    assert significant(Estimate(100, 5, "between-run"), Estimate(90, 5, "between-run"))
    assert not significant(Estimate(100, 8, "between-run"), Estimate(90, 8, "between-run"))
    assert not significant(Estimate(100, 0, "none"), Estimate(99.5, 0, "none"))  # under 1%: tied
    assert significant(Estimate(100, 0, "none"), Estimate(98, 0, "none"))


def test_dominance_needs_a_significant_gain_and_no_significant_loss() -> None:
    up_down = [True, False]  # max samples/s, min memory
    fast = point(Estimate(200, 10, "between-run"), Estimate(100, 0, "none"))
    slow = point(Estimate(150, 10, "between-run"), Estimate(100, 0, "none"))
    near = point(Estimate(190, 10, "between-run"), Estimate(100, 0, "none"))
    small = point(Estimate(150, 10, "between-run"), Estimate(50, 0, "none"))
    assert noise_dominates(fast, slow, up_down)  # 50 apart, noise 14: beaten, memory equal
    assert not noise_dominates(fast, near, up_down) and not noise_dominates(near, fast, up_down)
    assert not noise_dominates(fast, small, up_down)  # a real trade-off: half the memory
    assert noise_dominates(small, slow, up_down)


def test_a_configuration_of_several_runs_carries_the_between_run_interval() -> None:
    rate = parse_objective("samples_per_sec")
    two = [run("a", 100), run("b", 110)]
    got = estimate(two, rate)
    sd = statistics.stdev([100, 110])
    assert got.source == "between-run" and got.value == pytest.approx(105)
    assert got.half_width == pytest.approx(float(stdtrit(1, 0.975)) * sd / math.sqrt(2))  # 63.5: n=2 is weak


def test_a_single_run_carries_its_own_interval_spread_and_memory_none() -> None:
    spread = (0.96, 1.02, 0.99, 1.03, 1.0)
    one = [run("a", 1000, spread=spread)]
    got = estimate(one, parse_objective("samples_per_sec"))
    rates = [1000 * f for f in spread]
    relative = float(stdtrit(4, 0.975)) * statistics.stdev(rates) / math.sqrt(5) / statistics.fmean(rates)
    assert got.source == "within-run" and got.value == 1000
    assert got.half_width == pytest.approx(1000 * relative)
    result = one[0].result
    tokens_run = StoredRun.from_result(
        replace(result, summary=replace(result.summary, tokens_per_sec=128_000.0))
    )
    tokens = estimate(
        [tokens_run], parse_objective("tokens_per_sec")
    )  # proportional: the same relative width
    assert tokens.source == "within-run"
    assert tokens.half_width / tokens.value == pytest.approx(relative)
    assert estimate(one, parse_objective("peak_memory_bytes")) == Estimate(100, 0.0, "none")


FIGURES = {  # (precision, batch, threads): (two runs' samples/s, peak memory)
    ("fp32", 8, 1): ((100, 102), 100),
    ("fp32", 16, 1): ((180, 184), 150),
    ("fp32", 16, 2): ((181, 185), 150),  # the same as threads 1 within noise: both stay
    ("fp32", 8, 2): ((60, 61), 100),  # beaten by (fp32, 8, 1) beyond noise
    ("bf16", 8, 1): ((300, 304), 90),
    ("bf16", 16, 1): ((290, 292), 140),  # slower and bigger than bf16/8: dominated
}


def grid() -> list[StoredRun]:
    """precision × batch size × threads, each configuration run twice (with different seeds)."""
    runs = []
    for (precision, batch, threads), ((r1, r2), memory) in FIGURES.items():
        name = f"{precision}-{batch}-{threads}"
        runs.append(
            run(name + "-a", r1, memory, precision=precision, batch_size=batch, threads=threads, seed=0)
        )
        runs.append(
            run(name + "-b", r2, memory, precision=precision, batch_size=batch, threads=threads, seed=1)
        )
    return runs


def test_per_precision_the_best_of_the_other_options_and_its_frontier() -> None:
    view = oracle_view(grid(), "precision")
    assert [o.name for o in view.objectives] == ["samples_per_sec", "peak_memory_bytes"]
    assert view.varying == ["batch_size", "precision", "threads"]
    assert [(s.problem, s.value) for s in view.slices] == [
        ("fc_mnist/debug", "bf16"),
        ("fc_mnist/debug", "fp32"),
    ]
    bf16, fp32 = view.slices
    assert [p.label for p in bf16.front] == ["bf16-8-1-a +1"]  # the two runs pooled
    assert [p.label for p in bf16.dominated] == ["bf16-16-1-a +1"]
    assert bf16.best.settings["batch_size"] == 8 and bf16.best.estimates[0].value == pytest.approx(302)
    # 2 runs each: the spread is pooled over the 6 configurations, 6 degrees of freedom
    pooled = bf16.best.estimates[0]
    assert pooled.source == "pooled"
    deviations = [r / ((a + b) / 2) - 1 for (a, b), _ in FIGURES.values() for r in (a, b)]
    cv = math.sqrt(sum(d * d for d in deviations) / 6)
    assert pooled.half_width == pytest.approx(float(stdtrit(6, 0.975)) * cv * 302 / math.sqrt(2))
    assert view.notes == [
        f"fc_mnist/debug: samples/s varies by {cv:.1%} between runs of a configuration (pooled over its "
        "repeats, 6 degrees of freedom); configurations with fewer than 3 runs are given that spread"
    ]
    assert [p.label for p in fp32.front] == ["fp32-16-2-a +1", "fp32-16-1-a +1", "fp32-8-1-a +1"]
    assert [p.label for p in fp32.dominated] == ["fp32-8-2-a +1"]
    assert [p.label for p in fp32.tied] == ["fp32-16-1-a +1"] and bf16.tied == []  # 182 vs 183: noise
    assert not view.excluded


def test_any_option_that_varies_is_an_axis_in_numeric_order() -> None:
    view = oracle_view(grid(), "batch", [parse_objective("samples_per_sec")])
    assert view.axis == "batch_size" and [s.value for s in view.slices] == [8, 16]
    assert [p.label for p in view.slices[0].front] == ["bf16-8-1-a +1"]
    threads = oracle_view(grid(), "threads", [parse_objective("samples_per_sec")])
    assert [(s.value, s.best.settings["precision"]) for s in threads.slices] == [(1, "bf16"), (2, "fp32")]


def test_single_runs_are_ranked_on_their_interval_spread_and_the_view_says_so() -> None:
    spread = (0.9, 1.1, 0.9, 1.1, 1.0)  # ±10% intervals: a 3% difference is within them
    runs = [run("a", 100, spread=spread, threads=1), run("b", 97, spread=spread, threads=2)]
    runs += [run("c", 100, spread=spread, threads=1, precision="bf16")]
    view = oracle_view(runs, "precision", [parse_objective("samples_per_sec")])
    assert [p.label for p in view.slices[1].front] == ["a", "b"]
    assert "within-run" in view.notes[0]


def test_an_axis_that_is_unknown_or_constant_is_refused_naming_those_that_vary() -> None:
    with pytest.raises(
        FlowrateError, match=r"--by colour: no such option .* vary: batch_size, precision, threads"
    ):
        oracle_view(grid(), "colour")
    with pytest.raises(FlowrateError, match="--by optimizer: every selected run has optimizer=adamw"):
        oracle_view(grid(), "optimizer")
    same = [run("a", 100), run("b", 101)]
    with pytest.raises(FlowrateError, match="vary: none: every run has the same configuration"):
        oracle_view(same, "precision")


def test_the_plot_draws_each_values_frontier_in_its_colour_with_its_intervals() -> None:
    view = oracle_view(grid(), "precision")
    fig = oracle_scatter(view)
    ax = fig.axes[0]
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert [c.get_label() for c in bars] == [
        "precision=bf16 (1 on its frontier)",
        "precision=fp32 (3 on its frontier)",
    ]
    fp32 = bars[1]
    assert list(fp32.lines[0].get_xdata()) == [
        p.estimates[0].value for p in sorted(view.slices[1].front, key=lambda p: p.estimates[0].value)
    ]
    half_widths = fp32.lines[2][0].get_segments()  # the x error bars: value ± its 95% half-width
    slowest = view.slices[1].front[2]  # fp32 batch 8: the frontier's slowest, first from the left
    assert half_widths[0][0][0] == pytest.approx(slowest.estimates[0].value - slowest.estimates[0].half_width)
    stars = [c for c in ax.collections if isinstance(c, PathCollection) and c.get_sizes()[0] == 160]
    assert len(stars) == 2  # the best of each precision
    assert [list(s.get_offsets()[0]) for s in stars] == [
        [s.best.estimates[0].value, s.best.estimates[1].value] for s in view.slices
    ]
    with pytest.raises(FlowrateError, match="two objectives"):
        oracle_scatter(oracle_view(grid(), "precision", [parse_objective("samples_per_sec")]))


def test_an_option_that_differs_only_between_problems_is_no_axis() -> None:
    def of(name: str, problem: str, precision: str, batch: int) -> StoredRun:
        result = make_result(
            100.0 * batch, batch_size=batch, precision=precision, problem=problem, run_id=name
        )
        return StoredRun.from_result(result)

    runs = [of("m8", "fc_mnist", "fp32", 8), of("m16", "fc_mnist", "fp32", 16), of("r8", "resnet", "bf16", 8)]
    view = oracle_view(runs, "batch_size")
    assert view.varying == ["batch_size"]  # precision differs, but never within a problem
    assert [(s.problem, s.value) for s in view.slices] == [
        ("fc_mnist/debug", 8),
        ("fc_mnist/debug", 16),
        ("resnet/debug", 8),
    ]
    with pytest.raises(FlowrateError, match=r"precision takes one value within each problem \(bf16, fp32\)"):
        oracle_view(runs, "precision")


def test_the_pooled_spread_stands_in_for_configurations_with_few_runs() -> None:
    rate = parse_objective("samples_per_sec")
    repeated = [[run("a1", 90), run("a2", 110)], [run("b1", 190), run("b2", 210)]]  # ±10%, ±5%
    pooled = pooled_spread(repeated, rate)
    assert pooled == PooledSpread(pytest.approx(math.sqrt((2 * 0.1**2 + 2 * 0.05**2) / 2)), 2)
    one = estimate([run("c", 400)], rate, pooled)  # a single run: the pooled spread, not its intervals
    assert one == Estimate(400, pytest.approx(float(stdtrit(2, 0.975)) * pooled.cv * 400), "pooled")
    three = [run("d1", 100), run("d2", 101), run("d3", 102)]  # enough runs: their own interval
    assert estimate(three, rate, pooled).source == "between-run"
    assert pooled_spread(repeated[:1], rate) is None  # one degree of freedom is too few to pool


def test_the_best_on_throughput_can_be_dominated_by_one_as_fast_within_noise_and_smaller() -> None:
    spread = (0.9, 1.1, 0.9, 1.1, 1.0)  # ±10% intervals
    runs = [run("big", 100, 200, spread, batch_size=16), run("small", 97, 100, spread, batch_size=8)]
    runs += [run("other", 50, 100, spread, precision="bf16")]
    fp32 = oracle_view(runs, "precision").slices[1]
    assert fp32.best.label == "big" and [p.label for p in fp32.tied] == ["small"]
    assert [p.label for p in fp32.front] == ["small"] and [p.label for p in fp32.dominated] == ["big"]
    view = oracle_view(runs, "precision")
    ranks = [(row[1], row[2], row[-1]) for row in pareto_text.oracle_rows(view, show_dominated=False)]
    assert ranks == [("bf16", "best", "other"), ("fp32", "best, dominated", "big"), ("fp32", "tied", "small")]
