"""The timed loop with a fake clock and a fake step: exact intervals, stopping, non-finite losses.

The same LoopClock measures `flowrate run`'s loop (timed_loop pulls the steps) and a user's own
loop (a Session pushes them): both drivers must yield the same intervals from the same steps.
"""

from collections.abc import Callable

import pytest
import torch

from flowrate.config import RunConfig
from flowrate.errors import NonFiniteLoss
from flowrate.measure.loop import LoopClock, LoopPlan, LoopRecord, choose_sample_every, timed_loop


class FakeDevice:
    """A step that takes ``step_s`` seconds of fake time; counts syncs."""

    def __init__(self, step_s: float, losses: list[float] | None = None) -> None:
        self.now = 0.0
        self.step_s = step_s
        self.calls = 0
        self.syncs = 0
        self.losses = losses

    def clock(self) -> float:
        return self.now

    def step(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        self.now += self.step_s
        value = self.losses[self.calls] if self.losses else 1.0 / (self.calls + 1)
        self.calls += 1
        return torch.tensor(value)

    def sync(self) -> None:
        self.syncs += 1


def plan(**changes: object) -> LoopPlan:
    base = dict(
        preheat_steps=3,
        steps=None,
        min_steps=10,
        duration_s=1.0,
        sample_every=None,
        target_interval_s=0.2,
        smoothing=0.4,
    )
    base.update(changes)
    return LoopPlan(**base)  # type: ignore[arg-type]


BATCHES = [(torch.zeros(1),), (torch.ones(1),)]


def test_sample_every_is_chosen_from_preheat_step_time() -> None:
    dev = FakeDevice(step_s=0.05)
    record = timed_loop(dev.step, BATCHES, batch_size=8, sync=dev.sync, plan=plan(), clock=dev.clock)
    assert record.preheat_step_s == pytest.approx(0.05)
    assert record.sample_every == 4  # ceil(0.2 / 0.05)
    # duration 1 s at 0.2 s per interval: 5 intervals = 20 steps (>= min_steps 10)
    assert [i.steps for i in record.intervals] == [4] * 5
    assert all(i.reading.local_samples_per_sec == pytest.approx(32 / 0.2) for i in record.intervals)
    assert record.intervals[-1].reading.global_samples_per_sec == pytest.approx(160.0)
    assert len(record.losses) == 20
    # preheat: one sync per step; timed: one before the clock starts and one per sample point
    assert dev.syncs == 3 + 1 + 5
    assert dev.calls == 23


def test_min_steps_keeps_measuring_after_the_duration() -> None:
    dev = FakeDevice(step_s=0.5)
    record = timed_loop(dev.step, BATCHES, 1, dev.sync, plan(min_steps=6, duration_s=0.1), clock=dev.clock)
    assert record.sample_every == 1
    assert sum(i.steps for i in record.intervals) == 6


def test_fixed_steps_are_exact_with_a_shorter_last_interval() -> None:
    dev = FakeDevice(step_s=0.01)
    record = timed_loop(dev.step, BATCHES, 2, dev.sync, plan(steps=7, sample_every=3), clock=dev.clock)
    assert [(i.first_step, i.steps) for i in record.intervals] == [(0, 3), (3, 3), (6, 1)]
    assert record.losses == pytest.approx([1 / (4 + i) for i in range(7)])  # after 3 preheat steps


def test_choose_sample_every_bounds() -> None:
    assert choose_sample_every(plan(), None) == 1
    assert choose_sample_every(plan(), 1.0) == 1
    assert choose_sample_every(plan(steps=2), 0.001) == 2
    assert choose_sample_every(plan(sample_every=5), 0.001) == 5


def test_non_finite_loss_names_the_timed_step() -> None:
    losses = [1.0] * 3 + [1.0, 1.0, 1.0, 1.0, float("nan"), 1.0, 1.0]
    dev = FakeDevice(step_s=0.01, losses=losses)
    with pytest.raises(NonFiniteLoss) as caught:
        timed_loop(dev.step, BATCHES, 1, dev.sync, plan(steps=7, sample_every=2), clock=dev.clock)
    assert caught.value.step == 4
    assert "timed step 4" in str(caught.value)


def test_non_finite_loss_in_preheat() -> None:
    dev = FakeDevice(step_s=0.01, losses=[1.0, float("inf")])
    with pytest.raises(NonFiniteLoss, match="preheat step 1"):
        timed_loop(dev.step, BATCHES, 1, dev.sync, plan(steps=2), clock=dev.clock)


def test_checkpoints_are_intervals_of_their_own_with_exact_accounting() -> None:
    """Steps take 0.1 s and each checkpoint 0.5 s of fake time; every 4 steps, sample every 2."""
    dev = FakeDevice(step_s=0.1)
    saved: list[int] = []

    def checkpoint(done: int) -> None:
        saved.append(done)
        dev.now += 0.5

    record = timed_loop(
        dev.step,
        BATCHES,
        batch_size=10,
        sync=dev.sync,
        plan=plan(preheat_steps=0, steps=10, sample_every=3, checkpoint_every=4),
        clock=dev.clock,
        checkpoint=checkpoint,
    )
    # sample points fall on checkpoint boundaries; no checkpoint after the last step
    assert saved == [4, 8]
    layout = [(i.kind, i.first_step, i.steps, i.after_checkpoint) for i in record.intervals]
    assert layout == [
        ("compute", 0, 3, False),
        ("compute", 3, 1, False),
        ("checkpoint", 4, 0, False),
        ("compute", 4, 3, True),
        ("compute", 7, 1, False),
        ("checkpoint", 8, 0, False),
        ("compute", 8, 2, True),
    ]
    saves = [i for i in record.intervals if i.kind == "checkpoint"]
    assert [i.reading.seconds for i in saves] == pytest.approx([0.5, 0.5])
    assert all(i.reading.samples == 0 and i.reading.local_samples_per_sec == 0 for i in saves)
    last = record.intervals[-1].reading
    # GlobalRate as experienced: 100 samples over 1.0 s of steps + 1.0 s of checkpoints
    assert last.elapsed_s == pytest.approx(2.0)
    assert last.global_samples_per_sec == pytest.approx(50.0)
    compute = [i for i in record.intervals if i.kind == "compute"]
    assert sum(i.reading.samples for i in compute) / sum(i.reading.seconds for i in compute) == pytest.approx(
        100.0
    )
    assert compute[0].loss == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)


def test_a_checkpoint_plan_needs_a_checkpoint_function() -> None:
    dev = FakeDevice(step_s=0.1)
    with pytest.raises(ValueError, match="no checkpoint function"):
        timed_loop(dev.step, BATCHES, 1, dev.sync, plan(steps=2, checkpoint_every=1), clock=dev.clock)


def pushed(
    plan: LoopPlan, dev: FakeDevice, batch_size: int, checkpoint: Callable[[int], None] | None = None
) -> LoopRecord:
    """Drive a LoopClock as a Session does: the loop runs a step and hands over its loss until
    the clock says done; a loop that stops between sample points is flushed."""
    loop = LoopClock(plan, dev.sync, dev.clock, checkpoint=checkpoint)
    batch = 0
    while not loop.done:
        loop.on_step(dev.step(BATCHES[batch % 2]), batch_size)
        batch += 1
    loop.flush()
    return loop.record()


@pytest.mark.parametrize(
    "changes",
    [
        {},  # duration, sample interval chosen from the preheat
        {"steps": 7, "sample_every": 3},  # a shorter last interval
        {"min_steps": 6, "duration_s": 0.1},  # min_steps outlasts the duration
        {"preheat_steps": 2, "steps": 10, "sample_every": 3, "checkpoint_every": 4},
    ],
)
def test_pushed_and_pulled_loops_measure_the_same_intervals(changes: dict[str, object]) -> None:
    losses = [3.0 / (1 + i) for i in range(100)]

    def measure(
        drive: Callable[[FakeDevice, Callable[[int], None] | None], LoopRecord],
    ) -> tuple[object, ...]:
        dev = FakeDevice(step_s=0.05, losses=losses)
        saved: list[int] = []

        def checkpoint(done: int) -> None:
            saved.append(done)
            dev.now += 0.5

        record = drive(dev, checkpoint if "checkpoint_every" in changes else None)
        return record, saved, dev.calls, dev.syncs

    the_plan = plan(**changes)
    pulled = measure(
        lambda dev, ck: timed_loop(dev.step, BATCHES, 8, dev.sync, the_plan, dev.clock, checkpoint=ck)
    )
    pushed_ = measure(lambda dev, ck: pushed(the_plan, dev, 8, ck))

    def sequence(record: LoopRecord) -> list[tuple[object, ...]]:
        return [
            (
                i.index,
                i.kind,
                i.first_step,
                i.steps,
                i.reading.samples,
                i.reading.seconds,
                i.reading.local_samples_per_sec,
                i.reading.rate_samples_per_sec,
                i.reading.global_samples_per_sec,
                i.reading.elapsed_s,
                i.after_checkpoint,
                i.loss,
            )
            for i in record.intervals
        ]

    record = pulled[0]
    assert isinstance(record, LoopRecord) and isinstance(pushed_[0], LoopRecord)
    assert sequence(pushed_[0]) == sequence(record) and len(record.intervals) > 1
    assert pushed_ == pulled  # and the losses, preheat, sample interval, checkpoints, syncs


def test_a_loop_without_losses_counts_its_steps() -> None:
    """An inference loop that computes no loss: steps counted, intervals without a loss."""
    dev = FakeDevice(step_s=0.1)
    loop = LoopClock(plan(preheat_steps=1, steps=5, sample_every=2), dev.sync, dev.clock)
    while not loop.done:
        dev.step(BATCHES[0])
        loop.on_step(None, 4)
    record = loop.record()
    assert [(i.first_step, i.steps, i.loss) for i in record.intervals] == [
        (0, 2, None),
        (2, 2, None),
        (4, 1, None),
    ]
    assert record.losses == [] and loop.steps == 6
    assert record.intervals[-1].reading.global_samples_per_sec == pytest.approx(20 / 0.5)


def test_steps_and_a_duration_together_stop_at_whichever_comes_first() -> None:
    dev = FakeDevice(step_s=0.1)
    both = plan(preheat_steps=1, steps=100, min_steps=1, duration_s=0.5, sample_every=1)
    assert sum(i.steps for i in pushed(both, dev, 1).intervals) == 5


def test_a_plan_from_a_config_counts_steps_or_measures_a_duration() -> None:
    counted = LoopPlan.from_config(
        RunConfig(steps=7, preheat_steps=2, checkpoint_every=3, checkpoint_dir="ck")
    )
    assert (counted.steps, counted.duration_s, counted.preheat_steps, counted.checkpoint_every) == (
        7,
        None,
        2,
        3,
    )
    timed = LoopPlan.from_config(RunConfig(duration_s=3.0, min_steps=4, sample_every=2, smoothing=0.5))
    assert (timed.steps, timed.duration_s, timed.min_steps, timed.sample_every, timed.smoothing) == (
        None,
        3.0,
        4,
        2,
        0.5,
    )
    with pytest.raises(ValueError, match="never ends"):
        timed_loop(FakeDevice(0.1).step, BATCHES, 1, lambda: None, plan(duration_s=None))


def test_an_observer_ends_the_loop_at_the_sample_point_it_says_so() -> None:
    """Asked at every sample point with the record so far (flowrate explore's rungs in one
    process), the observer ends the loop at the first it answers yes, before the plan's duration."""
    dev = FakeDevice(step_s=0.05)
    seen: list[int] = []

    def observer(record: LoopRecord) -> bool:
        seen.append(sum(i.steps for i in record.intervals))
        return record.intervals[-1].reading.elapsed_s >= 0.4 - 1e-9

    record = timed_loop(dev.step, BATCHES, 8, dev.sync, plan(min_steps=1), clock=dev.clock, observer=observer)
    assert seen == [4, 8] and [i.steps for i in record.intervals] == [4, 4]
    assert dev.calls == 3 + 8


def test_an_observer_is_refused_in_a_data_parallel_loop() -> None:
    class Agreeing:
        def sample_every(self, mine: int) -> int:
            return mine

        def finished(self, mine: bool) -> bool:
            return mine

    with pytest.raises(ValueError, match="one rank"):
        LoopClock(plan(), lambda: None, consensus=Agreeing(), observer=lambda record: False)
