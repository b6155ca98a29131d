"""The budget planner: processes a side and seconds each, from the noise and the start-up."""

from __future__ import annotations

import math

import pytest
from scipy.special import stdtrit

from flowrate.campaigns.compare.plan import (
    BudgetTooSmall,
    Noise,
    budget_for,
    expected_half_width,
    minimum_budget,
    plan,
    processes_within,
)

ALPHA = 0.05
HISTORY = "the store's 40 earlier runs"


def test_a_process_cv_is_its_offset_plus_the_sampling_of_its_intervals() -> None:
    noise = Noise(between_cv=0.04, within_cv=0.05, startup_s=1.0, source="a first block", at_seconds=1.0)
    sampling = math.pi / 2 * 0.05**2 * 0.2  # per second measured: the median of 0.2 s intervals
    offset2 = 0.04**2 - sampling / 1.0
    assert noise.process_cv(1.0) == pytest.approx(0.04)
    assert noise.process_cv(4.0) == pytest.approx(math.sqrt(offset2 + sampling / 4.0))
    # steadier than independent intervals would be: the measured spread is all there is to halve
    steady = Noise(between_cv=0.02, within_cv=0.10, startup_s=1.0, source="a first block", at_seconds=1.0)
    assert steady.process_cv(1.0) == pytest.approx(0.02)
    assert steady.process_cv(4.0) == pytest.approx(0.01)
    # from history, the length it was measured at unknown: all of it is offset
    assert Noise(0.03, 0.05, 0.5, HISTORY).process_cv(2.0) == pytest.approx(math.sqrt(0.03**2 + sampling / 2))


def test_a_step_longer_than_an_interval_is_the_interval_a_process_samples_in() -> None:
    # transformer/mini on one thread: 0.63 s steps, so a 1 s run holds 1-2 intervals, not 5
    fast = Noise(between_cv=0.01, within_cv=0.05, startup_s=2.3, source=HISTORY)
    slow = Noise(between_cv=0.01, within_cv=0.05, startup_s=2.3, source=HISTORY, interval_s=0.63)
    assert slow.process_cv(1.0) ** 2 == pytest.approx(0.01**2 + math.pi / 2 * 0.05**2 * 0.63)
    assert fast.process_cv(1.0) ** 2 == pytest.approx(0.01**2 + math.pi / 2 * 0.05**2 * 0.2)
    # measuring less than a step still samples one whole step
    assert slow.process_cv(0.5) == pytest.approx(slow.process_cv(0.63))


def test_the_first_blocks_step_time_sets_the_plans_interval() -> None:
    from flowrate.campaigns.compare.budgeted import Process, noise_from

    slow = [Process(label, 100.0, 5.0, 1.26, 0.05, 1.0, 0.63, 5) for label in "ABBA"]
    fast = [Process(label, 100.0, 2.0, 1.0, 0.05, 1.0, 0.009, 5) for label in "ABBA"]
    assert noise_from(slow, None).interval_s == pytest.approx(0.63)
    assert noise_from(fast, None).interval_s == pytest.approx(0.2)


def test_cheap_processes_buy_many_short_ones_and_the_reason_says_why() -> None:
    noise = Noise(between_cv=0.036, within_cv=0.05, startup_s=0.5, source=HISTORY)
    chosen = plan(60.0, noise, ALPHA)
    assert (chosen.processes, chosen.seconds) == (30, 0.5)  # 60 s / (2 sides × 1.0 s), whole blocks
    cv = noise.process_cv(0.5)
    assert chosen.half_width == pytest.approx(math.expm1(float(stdtrit(58, 0.975)) * cv * math.sqrt(2 / 30)))
    assert chosen.reason == (
        "30 processes of 0.5 s a side: between-run CV 3.6%, within-run CV 5.0%, start-up 0.5 s "
        f"({HISTORY}); expected interval ±{chosen.half_width:.1%}"
    )


def test_a_costly_start_up_and_steady_offsets_buy_fewer_longer_processes() -> None:
    noise = Noise(between_cv=0.002, within_cv=0.2, startup_s=3.0, source=HISTORY)
    chosen = plan(120.0, noise, ALPHA)
    widths = {
        seconds: expected_half_width(noise, processes_within(120.0, 3.0 + seconds), seconds, ALPHA)
        for seconds in (0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0)  # 30 s and more: under 2 a side
    }
    assert chosen.seconds == min(widths, key=lambda s: widths[s]) == 12.0
    assert chosen.processes == processes_within(120.0, 15.0) == 4


def test_processes_come_in_whole_abba_blocks() -> None:
    assert processes_within(10.0, 1.0) == 4  # 10 processes' worth, 2 blocks of 4
    assert processes_within(7.9, 1.0) == 2
    assert processes_within(3.9, 1.0) == 0


def test_a_budget_under_two_processes_a_side_is_refused_naming_the_minimum() -> None:
    noise = Noise(between_cv=0.02, within_cv=0.05, startup_s=1.0, source=HISTORY)
    assert minimum_budget(1.0) == 6.0  # 2 a side × (1.0 s start-up + 0.5 s measured)
    assert plan(6.0, noise, ALPHA).processes == 2
    with pytest.raises(BudgetTooSmall, match=r"5\.9 s is too short for two processes a side: at least 6 s"):
        plan(5.9, noise, ALPHA)


def test_noise_figures_must_be_finite_and_not_negative() -> None:
    with pytest.raises(ValueError, match="startup_s"):
        Noise(0.02, 0.05, math.nan, HISTORY)


def test_the_least_budget_for_a_width_is_the_first_whose_plan_is_that_narrow() -> None:
    # transformer/mini on one thread of this VM (2026-11-28): steps of 0.5 s drift by ~3.5%
    noise = Noise(between_cv=0.05, within_cv=0.05, startup_s=1.8, source=HISTORY, interval_s=0.5)
    needed = budget_for(noise, 0.03, ALPHA)
    assert needed is not None
    assert plan(needed, noise, ALPHA).half_width <= 0.03
    assert plan(needed - 1.0, noise, ALPHA).half_width > 0.03  # to the second
    # no budget within a day narrows a process CV of 50% to ±0.1%
    assert budget_for(Noise(0.5, 0.5, 60.0, HISTORY), 0.001, ALPHA) is None
    with pytest.raises(ValueError, match="half_width"):
        budget_for(noise, 0.0, ALPHA)


def test_a_plan_wider_than_asked_says_what_the_width_asked_for_would_take() -> None:
    noise = Noise(between_cv=0.05, within_cv=0.05, startup_s=1.8, source=HISTORY, interval_s=0.5)
    chosen = plan(40.0, noise, ALPHA)
    assert chosen.half_width > 0.03
    wants = chosen.wanting(0.03, 20.0, ALPHA)  # 20 s of the budget went before and after the plan
    assert wants.wanted == 0.03
    assert wants.wanted_budget_s == pytest.approx(20.0 + (budget_for(noise, 0.03, ALPHA) or math.nan))
    assert wants.reason.startswith(chosen.reason)
    assert wants.wanted_budget_s is not None
    cost = math.ceil(wants.wanted_budget_s)
    assert 60 < cost < 3600
    said = f"about {cost // 60} min {cost % 60:02d} s"
    assert f"wider than the ±3.0% asked for: that would take a budget of {said}" in wants.reason
    # as narrow as asked, or nothing asked: the plan as it was
    assert chosen.wanting(chosen.half_width, 20.0, ALPHA) is chosen
    assert chosen.wanting(None, 20.0, ALPHA) is chosen
    beyond = plan(100.0, Noise(0.5, 0.5, 10.0, HISTORY), ALPHA).wanting(0.001, 20.0, ALPHA)
    assert beyond.wanted_budget_s is None and "would take a budget of more than 24 h 00 min" in beyond.reason


def test_where_earlier_blocks_show_the_drift_a_plan_expects_the_paired_interval() -> None:
    # between-run CV 10%, of which a side's two runs in one block differ by 4%: q = 0.16, so the
    # expected drift F is 1 + 4 · 0.84 / 0.16 = 22, above the threshold from 3 blocks on
    drifting = Noise(0.10, 0.05, 0.3, HISTORY, block_cv=0.04)
    assert drifting.paired_share == pytest.approx(0.16)
    width = expected_half_width(drifting, 30, 0.5, ALPHA)
    cv = drifting.process_cv(0.5)
    t = float(stdtrit(15 - 1, 1 - ALPHA / 2))  # 15 blocks
    assert width == pytest.approx(math.expm1(t * 0.4 * cv * math.sqrt(2 / 30)))
    unpaired = Noise(0.10, 0.05, 0.3, HISTORY)
    assert width < expected_half_width(unpaired, 30, 0.5, ALPHA) / 2
    chosen = plan(60.0, drifting, ALPHA)
    assert chosen.paired and ", paired by block (CV within a block 4.0%)" in chosen.reason
    assert not plan(60.0, unpaired, ALPHA).paired
    # where the blocks differ as much as the runs, there is nothing to pair: the unpaired interval
    steady = Noise(0.10, 0.05, 0.3, HISTORY, block_cv=0.10)
    assert expected_half_width(steady, 30, 0.5, ALPHA) == expected_half_width(unpaired, 30, 0.5, ALPHA)
    # and with two blocks a side's runs are never paired, whatever the drift
    assert expected_half_width(drifting, 4, 0.5, ALPHA) == expected_half_width(unpaired, 4, 0.5, ALPHA)
