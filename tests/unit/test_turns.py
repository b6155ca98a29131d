"""Two processes that take turns: the token protocol (flowrate.campaigns.process.turns), the verdict
over its pairs (flowrate.results.turns), and the plan that expects it."""

from __future__ import annotations

import math
import multiprocessing
import statistics
import threading

import numpy as np
import pytest
from scipy.special import stdtr, stdtrit

from flowrate.campaigns.compare.plan import Earlier, Noise, budget_for, expected_half_width, plan
from flowrate.campaigns.process.turns import Turns
from flowrate.results.turns import turns_test, turns_verdict
from flowrate.results.verdict import run_level_verdict

ALPHA = 0.05


class Clock:
    """A clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_run_s_clock_leaves_out_the_seconds_it_waited_for_its_turn() -> None:
    mine, theirs = multiprocessing.Pipe()
    clock = Clock()
    turns = Turns(mine, first=True, clock=clock)
    clock.now += 0.2  # an interval of work
    assert turns.clock() == pytest.approx(100.2)
    # the partner works for 0.7 s, then hands the turn back: the waiting costs this run nothing
    theirs.send_bytes(b"t")  # the token is back before this side asks: no wait at all

    assert turns.at_sample_point(None, None) is False  # hands over, takes it back, never stops the run
    assert theirs.recv_bytes() == b"t"
    assert turns.clock() == pytest.approx(100.2) and turns.turns == 1

    def partner() -> None:
        theirs.recv_bytes()
        clock.now += 0.7  # the partner's interval, on the shared clock
        theirs.send_bytes(b"t")

    helper = threading.Thread(target=partner)
    helper.start()
    turns.at_sample_point(None, None)
    helper.join()
    assert clock.now == pytest.approx(100.9)
    assert turns.clock() == pytest.approx(100.2)  # 0.7 s waited, left out
    assert turns.waited_s == pytest.approx(0.7)


def test_the_second_process_waits_for_its_first_turn_and_the_last_turn_is_handed_over() -> None:
    mine, theirs = multiprocessing.Pipe()
    second = Turns(mine, first=False, clock=Clock())
    theirs.send_bytes(b"t")
    second.begin()  # returns once the first process hands the turn over
    assert second.turns == 1
    second.end()
    assert theirs.recv_bytes() == b"t"  # the last turn goes back, and the end closes
    with pytest.raises(EOFError):
        theirs.recv_bytes()
    first = Turns(multiprocessing.Pipe()[0], first=True, clock=Clock())
    first.begin()  # the first process holds the first turn: no wait
    assert first.turns == 0


def test_a_partner_that_ended_leaves_the_other_working_alone_never_waiting() -> None:
    mine, theirs = multiprocessing.Pipe()
    clock = Clock()
    turns = Turns(mine, first=True, clock=clock)
    theirs.close()  # the partner failed, or died
    assert turns.at_sample_point(None, None) is False
    assert turns.alone and turns.waited_s == 0
    turns.at_sample_point(None, None)  # alone: neither sends nor waits
    turns.end()


def test_a_partner_that_dies_without_handing_over_leaves_the_other_alone() -> None:
    mine, theirs = multiprocessing.Pipe()
    turns = Turns(mine, first=False, clock=Clock())
    theirs.close()  # killed while holding the first turn: end of file, not a token
    turns.begin()
    assert turns.alone and turns.turns == 0
    assert turns.at_sample_point(None, None) is False


def test_pairs_are_tested_by_their_log_ratios_exactly() -> None:
    # a machine that drifts from 90 to 110 samples/s; B is 3% slower in every pair, give or take
    a = [90.0, 100.0, 110.0, 95.0, 105.0]
    b = [87.4, 96.9, 106.8, 92.2, 101.8]
    d = [math.log(y / x) for x, y in zip(a, b, strict=True)]
    se = statistics.stdev(d) / math.sqrt(5)
    verdict = turns_verdict(a, b, alpha=ALPHA, min_effect=0.01)
    assert verdict.ratio == pytest.approx(math.exp(statistics.fmean(d)), rel=1e-12)
    half = float(stdtrit(4, 1 - ALPHA / 2)) * se
    assert verdict.ci_low == pytest.approx(verdict.ratio * math.exp(-half), rel=1e-12)
    assert verdict.ci_high == pytest.approx(verdict.ratio * math.exp(half), rel=1e-12)
    assert verdict.p_value == pytest.approx(float(2 * stdtr(4, -abs(statistics.fmean(d)) / se)), rel=1e-9)
    assert verdict.direction == "slower" and verdict.significant
    assert verdict.method == (
        "paired t-test of the pairs' log ratios (5 pairs of processes that took turns, 4 degrees of freedom)"
    )
    cv = se * math.sqrt(5)
    assert verdict.evidence == f"5 runs a side in pairs that took turns, pair-ratio CV {cv:.1%}"
    # unpaired, the same runs say nothing: the drift between pairs swamps the 3%
    assert not run_level_verdict(a, b, alpha=ALPHA, min_effect=0.01).significant


def test_one_pair_is_judged_unpaired_with_the_store_s_noise() -> None:
    verdict = turns_verdict([100.0], [95.0], alpha=ALPHA, min_effect=0.01, history_cv=0.01, history_runs=30)
    plain = run_level_verdict([100.0], [95.0], alpha=ALPHA, min_effect=0.01, history_cv=0.01, history_runs=30)
    assert (verdict.ratio, verdict.ci_low, verdict.ci_high, verdict.p_value) == (
        plain.ratio,
        plain.ci_low,
        plain.ci_high,
        plain.p_value,
    )
    assert verdict.method.endswith("; unpaired: 1 pair that took turns")


@pytest.mark.parametrize("pairs", [2, 3, 5, 10, 30])
def test_pairs_on_a_drifting_machine_keep_the_false_positive_rate_at_alpha(pairs: int) -> None:
    # AR(1) drift over the pairs (correlation 0.9, 8%), each process its own 2% offset: A/A
    rng = np.random.default_rng(pairs)
    trials = 20_000
    drift = np.zeros((trials, pairs))
    drift[:, 0] = rng.normal(0, 0.08, trials)
    for i in range(1, pairs):
        drift[:, i] = 0.9 * drift[:, i - 1] + rng.normal(0, 0.08 * math.sqrt(1 - 0.81), trials)
    a = 100 * np.exp(drift + rng.normal(0, 0.02, (trials, pairs)))
    b = 100 * np.exp(drift + rng.normal(0, 0.02, (trials, pairs)))
    rate = float((turns_test(a, b).p_values() < ALPHA).mean())
    assert abs(rate - ALPHA) < 0.01
    # and a 5% slowdown is seen by the pairs far more often than the drift lets the runs alone see it
    if pairs >= 5:
        slow = turns_test(a, 0.95 * b)
        assert float((slow.p_values() < ALPHA).mean()) > 0.8


def test_a_plan_for_pairs_expects_the_paired_interval_at_most() -> None:
    noise = Noise(0.05, 0.02, 0.3, "the store's 40 earlier runs", at_seconds=1.0)
    chosen = plan(50.0, noise, ALPHA, turns=True)
    n, cv = chosen.processes, noise.process_cv(chosen.seconds)
    t = float(stdtrit(n - 1, 1 - ALPHA / 2))
    assert chosen.half_width == pytest.approx(math.expm1(t * cv * math.sqrt(2 / n)), rel=1e-12)
    assert chosen.turns and chosen.paired
    assert "expected interval at most ±" in chosen.reason
    assert chosen.reason.endswith("in pairs of processes that take turns")
    # the store's blocks show how much of the noise is drift: the bound takes that out too
    drifting = Noise(0.05, 0.02, 0.3, "the store's 40 earlier runs", at_seconds=1.0, block_cv=0.025)
    assert expected_half_width(drifting, n, chosen.seconds, ALPHA, turns=True) == pytest.approx(
        math.expm1(t * 0.5 * cv * math.sqrt(2 / n)), rel=1e-12
    )


def test_a_plan_for_pairs_counts_the_first_blocks_pairs_in_its_interval() -> None:
    noise = Noise(0.05, 0.02, 0.3, "a first block of 4 processes", at_seconds=1.0)
    alone = plan(50.0, noise, ALPHA, turns=True)
    chosen = plan(50.0, noise, ALPHA, turns=True, earlier=Earlier(2, 1.0))
    n, cv, cv_first = chosen.processes, noise.process_cv(chosen.seconds), noise.process_cv(1.0)
    t = float(stdtrit(n + 2 - 1, 1 - ALPHA / 2))
    expected = math.expm1(t * math.sqrt(2 * (n * cv**2 + 2 * cv_first**2)) / (n + 2))
    assert chosen.half_width == pytest.approx(expected, rel=1e-12)
    assert chosen.half_width < alone.half_width  # two more pairs narrow it
    assert chosen.earlier == Earlier(2, 1.0)
    assert chosen.reason.endswith("in pairs of processes that take turns (the first block's 2 pairs counted)")
    # and what a narrower interval would cost counts them too
    wanted = chosen.wanting(chosen.half_width / 2, 10.0, ALPHA)
    assert wanted.wanted_budget_s == pytest.approx(
        10.0 + budget_for(noise, chosen.half_width / 2, ALPHA, True, Earlier(2, 1.0))  # type: ignore[operator]
    )
    # one at a time the first block is not compared: nothing is counted
    assert plan(50.0, noise, ALPHA, earlier=Earlier(2, 1.0)).earlier == Earlier()
