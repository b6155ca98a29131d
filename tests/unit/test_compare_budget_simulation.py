"""A/A comparisons simulated for every plan the budget planner can choose (one process at a time
or in pairs that take turns), and for --until-ci within a budget: the verdict's false-positive
rate stays at alpha + 1%, with and without a drifting machine."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from flowrate.campaigns.compare.budgeted import PILOT_SECONDS
from flowrate.campaigns.compare.interleave import SEQUENTIAL_ALPHA_SHARE
from flowrate.campaigns.compare.plan import BudgetTooSmall, Earlier, Noise, Plan, plan
from flowrate.results.blocks import block_test
from flowrate.results.turns import turns_test

ALPHA = 0.05
TRIALS = 6000  # A/A comparisons per plan and drift: the rate's standard error is 0.28%
BUDGETS_S = (6.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
BETWEEN_CVS = (0.005, 0.02, 0.04, 0.08)
WITHIN_CVS = (0.01, 0.05, 0.2)
STARTUPS_S = (0.3, 0.5, 1.0, 3.0)
# the machine's drift, as a multiple of a process's CV: none; a random walk from process to process
# and a jump between blocks as large as that CV; three times as large
DRIFTS = (0.0, 1.0, 3.0)


def _plans() -> dict[int, Plan]:
    """Every plan the grid leads to, one per count of processes a side (what the test depends on)."""
    plans: dict[int, Plan] = {}
    for budget, between, within, startup in itertools.product(BUDGETS_S, BETWEEN_CVS, WITHIN_CVS, STARTUPS_S):
        try:
            chosen = plan(budget, Noise(between, within, startup, "simulated"), ALPHA)
        except BudgetTooSmall:
            continue
        plans.setdefault(chosen.processes, chosen)
    return plans


def _false_positive_rate(chosen: Plan, drift: float, rng: np.random.Generator) -> float:
    n = chosen.processes
    cv = chosen.noise.process_cv(chosen.seconds)
    order = np.array(list("ABBA" * (n // 2)))
    logs = cv * rng.standard_normal((TRIALS, 2 * n), dtype=np.float32)
    if drift:
        logs += drift * cv * np.cumsum(rng.standard_normal((TRIALS, 2 * n), dtype=np.float32), axis=1)
        logs += drift * cv * np.repeat(rng.standard_normal((TRIALS, n // 2), dtype=np.float32), 4, axis=1)
    values = np.exp(logs, dtype=np.float64)
    test = block_test(values[:, order == "A"], values[:, order == "B"], ALPHA)
    return float((test.p_values() < ALPHA).mean())


def test_the_grid_reaches_small_and_large_plans() -> None:
    counts = sorted(_plans())
    assert counts[0] == 2 and counts[-1] > 300
    assert all(count % 2 == 0 for count in counts)  # whole A B B A blocks


@pytest.mark.parametrize("drift", DRIFTS)
def test_every_plan_keeps_the_false_positive_rate_at_alpha_plus_one_percent(drift: float) -> None:
    rng = np.random.default_rng(41)
    rates = {n: _false_positive_rate(chosen, drift, rng) for n, chosen in _plans().items()}
    worst = max(rates, key=lambda n: rates[n])
    assert rates[worst] <= ALPHA + 0.01, f"{worst} processes a side: {rates[worst]:.2%}"
    # over all plans together (tens of thousands of comparisons): the rate itself, within 0.5%
    assert np.mean(list(rates.values())) <= ALPHA + 0.005


@pytest.mark.parametrize("drift", DRIFTS)
def test_until_ci_within_a_budget_keeps_the_false_positive_rate_at_alpha_plus_one_percent(
    drift: float,
) -> None:
    """Blocks until the interval is within ±target (at least 2 blocks, at most MAX_BLOCKS: the
    budget), the interval and verdict at alpha × SEQUENTIAL_ALPHA_SHARE, as --until-ci with
    --budget does; targets from a quarter to twice the process CV."""
    rng = np.random.default_rng(42)
    cv, trials, most = 0.02, 4000, 20
    level = ALPHA * SEQUENTIAL_ALPHA_SHARE
    order = np.array(list("ABBA" * most))
    for target in (0.25 * cv, 0.5 * cv, cv, 2 * cv):
        logs = cv * rng.standard_normal((trials, 4 * most))
        logs += drift * cv * np.cumsum(rng.standard_normal((trials, 4 * most)), axis=1)
        logs += drift * cv * np.repeat(rng.standard_normal((trials, most)), 4, axis=1)
        a, b = np.exp(logs[:, order == "A"]), np.exp(logs[:, order == "B"])
        decided = np.zeros(trials, dtype=bool)
        called = np.zeros(trials, dtype=bool)
        for blocks in range(2, most + 1):
            test = block_test(a[:, : 2 * blocks], b[:, : 2 * blocks], level)
            low, high = test.interval(level)
            stop = ~decided & (((high - low) / (high + low) <= target) | (blocks == most))
            called |= stop & (test.p_values() < level)
            decided |= stop
        assert called.mean() <= ALPHA + 0.01, f"target ±{target:.2%}: {called.mean():.2%}"


def _ar1(rng: np.random.Generator, trials: int, runs: int, rho: float) -> np.ndarray:
    """Log noise that carries from one process to the next with correlation ``rho``, unit variance."""
    shocks = rng.standard_normal((trials, runs))
    logs = np.empty_like(shocks)
    logs[:, 0] = shocks[:, 0]
    for run in range(1, runs):
        logs[:, run] = rho * logs[:, run - 1] + math.sqrt(1 - rho * rho) * shocks[:, run]
    return logs


@pytest.mark.parametrize("blocks", (4, 6, 10))
def test_the_comparisons_that_are_paired_keep_the_false_positive_rate_at_alpha_plus_one_percent(
    blocks: int,
) -> None:
    """The choice to pair must not pick the comparisons whose paired test happens to look precise:
    among the A/A comparisons that were paired, the rate stays at alpha + 1%, on a machine whose
    speed carries from one process to the next (AR(1), correlation 0.5) and on one that jumps
    between blocks (as large as the noise)."""
    rng = np.random.default_rng(43)
    trials, cv = 20000, 0.03
    order = np.array(list("ABBA" * blocks))
    machines = {
        "carries over": _ar1(rng, trials, 4 * blocks, 0.5),
        "jumps between blocks": rng.standard_normal((trials, 4 * blocks))
        + np.repeat(rng.standard_normal((trials, blocks)), 4, axis=1),
    }
    for machine, logs in machines.items():
        values = np.exp(cv * logs)
        test = block_test(values[:, order == "A"], values[:, order == "B"], ALPHA)
        called = test.p_values()[test.paired] < ALPHA
        assert test.paired.sum() > 2000, machine  # enough paired comparisons to tell 5% from 6%
        assert called.mean() <= ALPHA + 0.01, f"{machine}: {called.mean():.2%} of {test.paired.sum()}"


def _turn_plans() -> dict[int, Plan]:
    """Every plan the grid leads to for sides that take turns, one per count of processes a side
    (as the budget plans: with the first block's two pairs counted)."""
    plans: dict[int, Plan] = {}
    for budget, between, within, startup in itertools.product(BUDGETS_S, BETWEEN_CVS, WITHIN_CVS, STARTUPS_S):
        try:
            noise = Noise(between, within, startup, "simulated")
            chosen = plan(budget, noise, ALPHA, turns=True, earlier=Earlier(2, PILOT_SECONDS))
        except BudgetTooSmall:
            continue
        plans.setdefault(chosen.processes, chosen)
    return plans


def _turns_logs(rng: np.random.Generator, trials: int, pairs: int, cv: float, drift: float) -> np.ndarray:
    """Each side's log values (trials, 2, pairs): a process's own noise, and the machine's drift
    (a random walk from pair to pair, and a jump per pair, ``drift`` times the CV), which the two
    processes of a pair share."""
    logs = cv * rng.standard_normal((trials, 2, pairs))
    shared = (
        drift
        * cv
        * (np.cumsum(rng.standard_normal((trials, pairs)), axis=1) + rng.standard_normal((trials, pairs)))
    )
    return logs + shared[:, None, :]


@pytest.mark.parametrize("drift", DRIFTS)
def test_every_plan_in_turns_keeps_the_false_positive_rate_at_alpha_plus_one_percent(drift: float) -> None:
    rng = np.random.default_rng(44)
    plans = _turn_plans()
    assert min(plans) == 2 and max(plans) > 100
    rates = {}
    for n, chosen in plans.items():
        values = np.exp(_turns_logs(rng, TRIALS, n, chosen.noise.process_cv(chosen.seconds), drift))
        rates[n] = float((turns_test(values[:, 0], values[:, 1]).p_values() < ALPHA).mean())
    worst = max(rates, key=lambda n: rates[n])
    assert rates[worst] <= ALPHA + 0.01, f"{worst} pairs: {rates[worst]:.2%}"
    assert np.mean(list(rates.values())) <= ALPHA + 0.005


@pytest.mark.parametrize("drift", DRIFTS)
def test_in_turns_the_first_blocks_pairs_and_a_lone_last_pair_keep_the_false_positive_rate(
    drift: float,
) -> None:
    """The verdict in turns also takes the first block's two pairs, whose processes measured
    PILOT_SECONDS (another CV than the plan's length gives), and may end on a lone pair (an odd
    count): for every plan, with and without it, the rate stays at alpha + 1%."""
    rng = np.random.default_rng(46)
    rates = {}
    for n, chosen in _turn_plans().items():
        for lone in (0, 1):
            first = _turns_logs(rng, TRIALS, 2, chosen.noise.process_cv(PILOT_SECONDS), drift)
            planned = _turns_logs(rng, TRIALS, n + lone, chosen.noise.process_cv(chosen.seconds), drift)
            values = np.exp(np.concatenate([first, planned], axis=2))
            rates[n, lone] = float((turns_test(values[:, 0], values[:, 1]).p_values() < ALPHA).mean())
    worst = max(rates, key=lambda key: rates[key])
    assert rates[worst] <= ALPHA + 0.01, f"{worst}: {rates[worst]:.2%}"
    assert np.mean(list(rates.values())) <= ALPHA + 0.005


@pytest.mark.parametrize("drift", DRIFTS)
def test_until_ci_in_turns_keeps_the_false_positive_rate_at_alpha_plus_one_percent(drift: float) -> None:
    """Blocks of two pairs until the pairs' interval is within ±target (narrow_enough: at least
    two blocks), at alpha × SEQUENTIAL_ALPHA_SHARE, as --until-ci with --budget does in turns."""
    rng = np.random.default_rng(45)
    cv, trials, most = 0.02, 4000, 20
    level = ALPHA * SEQUENTIAL_ALPHA_SHARE
    for target in (0.25 * cv, 0.5 * cv, cv, 2 * cv):
        values = np.exp(_turns_logs(rng, trials, 2 * most, cv, drift))
        decided = np.zeros(trials, dtype=bool)
        called = np.zeros(trials, dtype=bool)
        for blocks in range(2, most + 1):
            test = turns_test(values[:, 0, : 2 * blocks], values[:, 1, : 2 * blocks])
            low, high = test.interval(level)
            stop = ~decided & (((high - low) / (high + low) <= target) | (blocks == most))
            called |= stop & (test.p_values() < level)
            decided |= stop
        assert called.mean() <= ALPHA + 0.01, f"target ±{target:.2%}: {called.mean():.2%}"
