"""Spending a budget: a first block, a plan for the rest, A B B A blocks while they fit."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from factories import make_result
from flowrate.campaigns.compare.budgeted import (
    BUDGET_SPENT,
    FINISH_S,
    Process,
    Spent,
    budget_report,
    noise_from,
    pilot_seconds,
    planned_preheat,
    spend,
)
from flowrate.campaigns.compare.interleave import INTERRUPTED, NARROW
from flowrate.campaigns.compare.plan import BudgetTooSmall, Noise, Plan, budget_for
from flowrate.results.compare import History, compare

ALPHA = 0.05


def _none() -> History | None:
    return None


class FakeMachine:
    """A clock that moves only when a process runs: each takes ``startup_s`` plus what it
    measures; side A runs at 100 samples/s, B at ``b_rate``, with a fixed wobble."""

    def __init__(
        self, startup_s: float = 1.0, b_rate: float = 100.0, slower: dict[int, float] | None = None
    ) -> None:
        self.now = 0.0
        self.startup_s = startup_s
        self.slower = slower or {}  # the Nth process (from 1): seconds more start-up
        self.b_rate = b_rate
        self.calls: list[tuple[str, float, bool]] = []

    def clock(self) -> float:
        return self.now

    def run_one(self, label: str, seconds: float, first: bool, preheat: int | None = None) -> Process:
        self.calls.append((label, seconds, first))
        wall = self.startup_s + self.slower.get(len(self.calls), 0.0) + seconds
        self.now += wall
        wobble = (1.0, 1.02, 0.99, 0.98)[len(self.calls) % 4]
        rate = (100.0 if label == "A" else self.b_rate) * wobble
        return Process(label, rate, wall, seconds, 0.05, seconds)

    def spend(self, budget_s: float, **options: Any) -> Spent:
        """spend() on this machine from 0 s, at ALPHA, with the store's 40 runs at a CV of 3.6%
        unless ``options`` (spend's own) say otherwise."""
        options.setdefault("history_of", lambda: History(cv=0.036, runs=40))
        return spend(budget_s, clock=self.clock, started=0.0, run_one=self.run_one, alpha=ALPHA, **options)

    def run_pair(
        self, first: str, second: str, seconds: float, pilot: bool, preheat: int | None = None
    ) -> tuple[Process, Process]:
        """Two processes that take turns: the pair's wall time is what the two would take one after
        the other, half to each, as flowrate.campaigns.compare.live splits it."""
        return self.run_one(first, seconds, pilot, preheat), self.run_one(second, seconds, pilot, preheat)


def test_a_first_block_measures_then_blocks_run_while_the_next_fits() -> None:
    machine = FakeMachine(startup_s=1.0)
    spent = spend(
        30.0, clock=machine.clock, started=0.0, run_one=machine.run_one, history_of=lambda: None, alpha=ALPHA
    )
    assert pilot_seconds(30.0) == 0.8  # 30 s × 25% / 4 − 1 s assumed start-up
    first = [call for call in machine.calls if call[2]]
    assert first == [("A", 0.8, True), ("B", 0.8, True), ("B", 0.8, True), ("A", 0.8, True)]
    assert spent.plan is not None
    assert spent.plan.noise.startup_s == pytest.approx(1.0)
    assert spent.plan.noise.source == "a first block of 4 processes"
    # the first block took 7.2 s; the plan has 22.8 s less the finishing reserve; each planned
    # block takes 4 × (1 s + seconds)
    rest = machine.calls[4:]
    assert "".join(label for label, _, _ in rest) == "ABBA" * (len(rest) // 4)
    block_s = 4 * (1.0 + spent.plan.seconds)
    assert len(rest) // 4 == math.floor((22.8 - FINISH_S) / block_s)  # every block that fits, and no more
    assert spent.stopped == BUDGET_SPENT
    assert spent.elapsed_s == pytest.approx(machine.now) and spent.elapsed_s <= 30.0
    assert len(spent.values["A"]) == len(spent.values["B"]) == len(rest) // 2


def test_the_store_s_history_gives_the_between_run_noise() -> None:
    pilot = [Process(label, 100.0 + i, 2.5, 1.0, 0.04, 1.0) for i, label in enumerate("ABBA")]
    noise = noise_from(pilot, History(cv=0.036, runs=40))
    assert (noise.between_cv, noise.within_cv, noise.startup_s) == (0.036, 0.04, 1.5)
    assert noise.source == "the store's 40 earlier runs" and noise.at_seconds is None
    own = noise_from(pilot, None)
    # A: 100 and 103, B: 101 and 102, relative to each side's mean, 2 degrees of freedom
    squares = (1.5 / 101.5) ** 2 * 2 + (0.5 / 101.5) ** 2 * 2
    assert own.between_cv == pytest.approx(math.sqrt(squares / 2))
    assert own.at_seconds == 1.0


def test_until_ci_stops_once_the_interval_is_narrow_enough() -> None:
    machine = FakeMachine(startup_s=0.2)
    spent = spend(
        600.0,
        clock=machine.clock,
        started=0.0,
        run_one=machine.run_one,
        history_of=lambda: None,
        alpha=ALPHA / 2,
        until_ci=0.05,
    )
    assert spent.stopped == NARROW
    assert len(spent.values["A"]) == 4  # two blocks, the least the interval is judged over
    assert spent.elapsed_s < 600.0


def test_a_budget_the_first_block_leaves_too_little_of_is_refused_with_the_measured_minimum() -> None:
    machine = FakeMachine(startup_s=3.0)
    with pytest.raises(BudgetTooSmall) as refused:
        spend(15.0, clock=machine.clock, started=0.0, run_one=machine.run_one, history_of=_none, alpha=ALPHA)
    # 4 × 3.5 s of first block, then 2 a side × (3 s + 0.5 s), then the finishing reserve
    assert refused.value.minimum_s == pytest.approx(14.0 + 14.0 + FINISH_S)
    assert len(machine.calls) == 4


def test_an_interrupt_ends_the_runs_with_what_was_measured() -> None:
    machine = FakeMachine()

    def interrupted(label: str, seconds: float, first: bool, preheat: int | None) -> Process:
        if len(machine.calls) == 6:
            raise KeyboardInterrupt
        return machine.run_one(label, seconds, first)

    spent = spend(60.0, clock=machine.clock, started=0.0, run_one=interrupted, history_of=_none, alpha=ALPHA)
    assert spent.stopped == INTERRUPTED
    assert spent.values == {"A": [pytest.approx(100.0 * 1.02)], "B": [pytest.approx(100.0 * 0.99)]}


def test_no_block_starts_that_would_end_after_the_budget() -> None:
    machine = FakeMachine(startup_s=0.5)
    spent = spend(
        32.5,
        clock=machine.clock,
        started=0.0,
        run_one=machine.run_one,
        history_of=lambda: History(cv=0.036, runs=40),
        alpha=ALPHA,
    )
    assert spent.plan is not None and (spent.plan.seconds, spent.plan.noise.startup_s) == (0.5, 0.5)
    # a first block of 4 × 1.5 s, then blocks of 4 × 1.0 s: the 6th ends at 30 s, a 7th would at 34 s
    assert len(spent.values["A"]) == 12
    assert spent.elapsed_s == 30.0


def test_a_budget_whose_first_planned_block_would_overrun_is_refused() -> None:
    machine = FakeMachine(startup_s=1.0, slower={3: 6.0})  # the first block's third starts 6 s slower
    planned: list[Plan] = []
    with pytest.raises(BudgetTooSmall) as refused:
        spend(
            24.0,
            clock=machine.clock,
            started=0.0,
            run_one=machine.run_one,
            history_of=_none,
            alpha=ALPHA,
            on_plan=planned.append,
        )
    assert len(machine.calls) == 4  # the first block only: 3 × 1.5 s + 7.5 s
    # the plan counts on the median start-up (1 s); a block judged by the slowest is 4 × (7 s + s)
    assert planned[0].noise.startup_s == 1.0
    assert refused.value.minimum_s == 12.0 + 4 * (7.0 + planned[0].seconds) + FINISH_S


def test_a_side_at_a_revision_measures_the_plans_seconds_through_its_own_command_line() -> None:
    from pathlib import Path

    from flowrate.campaigns.compare.live import Side
    from flowrate.campaigns.compare.revisions import Revision

    side = Side("B", "-p fc_mnist", ["-p", "fc_mnist"], None, Revision("HEAD", "a" * 40, Path("/src")))
    planned = side.measuring(1.5)
    assert planned.tokens == ["-p", "fc_mnist", "--duration", "1.5", "--min-steps", "1"]
    assert planned.argv == ["flowrate", "run", "-p", "fc_mnist", "--duration", "1.5", "--min-steps", "1"]
    assert planned.revision == side.revision and side.tokens == ["-p", "fc_mnist"]


def test_the_plans_seconds_not_the_default_least_steps_set_a_run_s_length() -> None:
    from flowrate.campaigns.compare.live import Side
    from flowrate.config import RunConfig

    # a slow model's default 10 steps would measure far longer than the plan's seconds
    side = Side("A", "-p transformer", ["-p", "transformer"], RunConfig(problem="transformer"))
    planned = side.measuring(1.0)
    assert planned.config is not None
    assert (planned.config.duration_s, planned.config.min_steps) == (1.0, 1)
    # a spec's own --min-steps stands
    own = Side(
        "A", "-p transformer --min-steps 4", ["-p", "transformer", "--min-steps", "4"], RunConfig(min_steps=4)
    )
    kept = own.measuring(1.0)
    assert kept.tokens == ["-p", "transformer", "--min-steps", "4", "--duration", "1"]
    assert kept.config is not None and kept.config.min_steps == 4


def test_the_plans_warm_up_steps_go_to_the_run_unless_the_spec_sets_its_own() -> None:
    from flowrate.campaigns.compare.live import Side
    from flowrate.config import RunConfig

    side = Side("A", "-p transformer", ["-p", "transformer"], RunConfig(problem="transformer"))
    planned = side.measuring(1.0, 2)
    assert planned.tokens[-2:] == ["--preheat", "2"]
    assert planned.config is not None and planned.config.preheat_steps == 2
    own = Side(
        "A", "-p transformer --preheat 3", ["-p", "transformer", "--preheat", "3"], RunConfig(preheat_steps=3)
    )
    kept = own.measuring(1.0, 2)
    assert kept.tokens == ["-p", "transformer", "--preheat", "3", "--duration", "1", "--min-steps", "1"]
    assert kept.config is not None and kept.config.preheat_steps == 3


@pytest.mark.parametrize(
    ("step_s", "preheat"),
    [
        (0.63, 2),  # transformer/mini on one thread: 1 s of steps is 2
        (0.3, 4),  # 1 s is 3.3 steps: 4
        (0.009, None),  # fc_mnist: its own five are fewer than 1 s of steps
        (None, None),  # a step's time unknown: its own
    ],
)
def test_a_slow_step_warms_up_for_a_second_of_steps_and_at_least_two(
    step_s: float | None, preheat: int | None
) -> None:
    pilot = [Process(label, 100.0, 6.0, 1.0, 0.04, 1.0, step_s, 5) for label in "ABBA"]
    assert planned_preheat(pilot) == preheat
    assert planned_preheat([Process("A", 100.0, 6.0, 1.0, 0.04, 1.0, 0.63, None)] * 4) is None
    # a first block that already warmed up for fewer after its first process: the side's own is 5
    shorter = [pilot[0], *(dataclasses.replace(p, preheat_steps=preheat) for p in pilot[1:])]
    assert planned_preheat(shorter) == preheat


@pytest.mark.parametrize(("step_s", "preheat"), [(0.63, 1), (0.3, 3), (0.009, None)])
def test_a_counted_step_is_one_of_the_warm_up_steps(step_s: float, preheat: int | None) -> None:
    counted = [Process(label, 100.0, 6.0, 1.0, 0.04, 1.0, step_s, 5, counted=True) for label in "ABBA"]
    assert planned_preheat(counted) == preheat
    if preheat == 1:  # and the plan's reason says it in words
        noise = Noise(0.05, 0.05, 1.0, "a first block of 4 processes")
        chosen = Plan(4, 1.0, 30.0, noise, 0.05, preheat_steps=preheat)
        assert ", 1 warm-up step: between-run CV" in chosen.reason
    # where one process of the first block did not count a step (it failed), none is taken off
    some = [dataclasses.replace(counted[0], counted=False), *counted[1:]]
    assert planned_preheat(some) == (None if preheat is None else preheat + 1)


@pytest.mark.parametrize("executed", [2.0e6, None])
def test_a_recorded_run_that_counted_its_flops_is_a_process_with_a_counted_step(
    executed: float | None, tmp_path: Any
) -> None:
    from flowrate.campaigns.compare.live import _process
    from flowrate.results.sections import Flops

    result = dataclasses.replace(make_result(500.0), flops=Flops(executed_flops_per_sample=executed))
    process = _process("A", result, 1.0, 2.0)
    assert process.counted is (executed is not None)
    assert process.preheat_steps == result.summary.preheat_steps


class WarmingMachine(FakeMachine):
    """Each process takes 1 s to start, then its warm-up steps of 0.63 s (five unless told), then
    what it measures."""

    def __init__(self) -> None:
        super().__init__(startup_s=1.0)
        self.preheats: list[int | None] = []

    def run_one(self, label: str, seconds: float, first: bool, preheat: int | None = None) -> Process:
        self.calls.append((label, seconds, first))
        self.preheats.append(preheat)
        steps = 5 if preheat is None else preheat
        wall = self.startup_s + steps * 0.63 + seconds
        self.now += wall
        rate = 100.0 * (1.0, 1.02, 0.99, 0.98)[len(self.calls) % 4]
        return Process(label, rate, wall, seconds, 0.05, seconds, 0.63, steps)


@pytest.mark.parametrize("own", [False, True])
def test_after_the_first_process_a_slow_step_warms_up_for_fewer_steps_and_the_plan_counts_it(
    own: bool,
) -> None:
    machine = WarmingMachine()
    spent = spend(
        60.0,
        clock=machine.clock,
        started=0.0,
        run_one=machine.run_one,
        history_of=_none,
        alpha=ALPHA,
        own_preheat=own,
    )
    assert spent.plan is not None
    if own:  # a side that sets --preheat keeps it
        assert set(machine.preheats) == {None}
        assert spent.plan.preheat_steps is None
        assert spent.plan.noise.startup_s == pytest.approx(1.0 + 5 * 0.63)
    else:
        # the first process warms up as the side says; from its step time, every later one for 2
        assert machine.preheats[0] is None and set(machine.preheats[1:]) == {2}
        assert spent.plan.preheat_steps == 2
        assert spent.plan.noise.startup_s == pytest.approx(1.0 + 2 * 0.63)
        assert ", 2 warm-up steps:" in spent.plan.reason
    assert spent.elapsed_s <= 60.0 and len(machine.calls) > 4


def _spend_on(machine: FakeMachine, budget_s: float, **options: Any) -> Spent:
    """``spend`` on a fake machine with no history, at ALPHA."""
    return spend(
        budget_s,
        clock=machine.clock,
        started=0.0,
        run_one=machine.run_one,
        history_of=_none,
        alpha=ALPHA,
        **options,
    )


def test_a_plan_wider_than_the_width_wanted_says_the_whole_budget_that_would_buy_it() -> None:
    spent = _spend_on(FakeMachine(startup_s=1.0), 30.0, wanted=0.001)
    assert spent.plan is not None and spent.plan.wanted == 0.001
    # what went before the plan (the first block, 7.2 s) and the finishing reserve, then the plan's
    more = budget_for(spent.plan.noise, 0.001, ALPHA)
    assert more is not None and spent.plan.wanted_budget_s == pytest.approx(7.2 + FINISH_S + more)
    comparison = compare(
        [make_result(samples_per_sec=v) for v in spent.values["A"]],
        [make_result(samples_per_sec=v) for v in spent.values["B"]],
    )
    planned = budget_report(spent, comparison)["plan"]
    assert (planned["wanted_half_width"], planned["wanted_budget_s"]) == (0.001, spent.plan.wanted_budget_s)
    # asked for no narrower than it is: nothing said
    wide = _spend_on(FakeMachine(startup_s=1.0), 30.0, wanted=0.5)
    assert wide.plan is not None and wide.plan.wanted is None and wide.plan.wanted_budget_s is None


def test_the_plans_noise_carries_the_blocks_cv_the_store_knows() -> None:
    pilot = [Process(label, 100.0 + i, 2.5, 1.0, 0.04, 1.0) for i, label in enumerate("ABBA")]
    known = noise_from(pilot, History(0.10, 41, block_cv=0.04, block_df=30))
    assert (known.between_cv, known.block_cv) == (0.10, 0.04)
    assert noise_from(pilot, None).block_cv is None  # one block says nothing of the drift between blocks


@pytest.mark.parametrize(("coin", "order"), [(0, ["A", "B"]), (1, ["B", "A"])])
def test_in_turns_one_last_pair_runs_where_a_block_no_longer_fits_its_first_turn_by_a_coin(
    coin: int, order: list[str]
) -> None:
    machine = FakeMachine(startup_s=2.0)
    spent = machine.spend(68.0, run_pair=machine.run_pair, first_mover=lambda: coin)
    assert spent.plan is not None and (spent.plan.seconds, spent.plan.processes) == (1.0, 8)
    # a first block of 4 × 3 s, four blocks of 4 × 3 s end at 60 s: 6.5 s are left of the 66.5 s
    # before FINISH_S, too few for a block (12 s) but enough for a pair (6 s), which ends at 66 s;
    # the first block's two pairs are compared with the planned nine
    assert (len(spent.values["A"]), len(spent.values["B"]), spent.elapsed_s) == (11, 11, 66.0)
    assert spent.values["A"][:2] == [p.value for p in spent.pilot if p.label == "A"]
    assert spent.lone_pair and spent.stopped == BUDGET_SPENT
    assert [label for label, _, _ in machine.calls[-2:]] == order
    # the pairs before it gave each side the first turn equally often
    firsts = [machine.calls[i][0] for i in range(4, len(machine.calls) - 2, 2)]
    assert firsts.count("A") == firsts.count("B") == 4


def test_no_lone_pair_runs_where_not_even_a_pair_fits_nor_one_at_a_time() -> None:
    machine = FakeMachine(startup_s=2.0)
    spent = machine.spend(66.0, run_pair=machine.run_pair)
    # 4.5 s are left at 60 s (a plan of 8 processes of 1 s): less than a pair's 6 s
    assert (len(spent.values["A"]), spent.elapsed_s, spent.lone_pair) == (2 + 8, 60.0, False)
    machine = FakeMachine(startup_s=2.0)
    alone = machine.spend(60.0)
    # one at a time (a plan of 1.5 s), the blocks of four A B B A are the unit: three end at 54 s
    assert (len(alone.values["A"]), alone.elapsed_s, alone.lone_pair) == (6, 54.0, False)


@pytest.mark.parametrize(
    ("step_s", "counted", "in_turns", "one_at_a_time"),
    [
        (0.63, True, 0, 1),  # transformer/mini: in turns the counted step is all the warm-up
        (0.63, False, 1, 2),
        (0.1, True, 2, 9),  # a quarter of a second of steps is 3, the counted one among them
        (0.009, True, 27, None),  # a second of steps is more than the side's own 50
    ],
)
def test_processes_that_take_turns_warm_up_for_a_quarter_second_of_steps_and_at_least_one(
    step_s: float, counted: bool, in_turns: int, one_at_a_time: int | None
) -> None:
    pilot = [Process(label, 100.0, 6.0, 1.0, 0.04, 1.0, step_s, 50, counted=counted) for label in "ABBA"]
    assert planned_preheat(pilot, turns=True) == in_turns
    assert planned_preheat(pilot) == one_at_a_time


@pytest.mark.parametrize(("own", "first"), [(False, 1), (True, None)])
def test_in_turns_the_first_pair_warms_up_for_one_step_unless_a_side_sets_its_own(
    own: bool, first: int | None
) -> None:
    machine = FakeMachine(startup_s=1.0)
    asked: list[int | None] = []

    def run_pair(a: str, b: str, seconds: float, pilot: bool, preheat: int | None) -> tuple[Process, Process]:
        asked.append(preheat)
        return machine.run_pair(a, b, seconds, pilot, preheat)

    machine.spend(30.0, history_of=_none, run_pair=run_pair, own_preheat=own)
    # the fake's processes time no step: after the first pair, the side's own warm-up (None)
    assert asked[0] == first and set(asked[1:]) == {None}
