"""The watch that measures a run at each rung and stops it where it is beaten (exact, from fake
loop records and made Results): rungs passed together at one sample point, a rung's minimum
steps, a figure it cannot read, and the Result each rung is recorded with."""

from __future__ import annotations

from factories import make_result
from flowrate.campaigns.rungs.ladder import Continuation, Measured
from flowrate.campaigns.rungs.watch import RungWatch, plan_for
from flowrate.measure.loop import Interval, LoopRecord
from flowrate.measure.rate import RateReading
from flowrate.results.schema import Result

OBJECTIVES = (("samples_per_sec", True), ("peak_memory_bytes", False))
DURATIONS = (1.0, 3.0, 9.0)


def _record(*ends: tuple[float, int]) -> LoopRecord:
    """A loop's record whose intervals end at these (elapsed seconds, steps) points."""
    intervals = [
        Interval(i, 0, steps, RateReading(steps, 1.0, 1.0, 1.0, 1.0, elapsed))
        for i, (elapsed, steps) in enumerate(ends)
    ]
    return LoopRecord(intervals, [], 0.0, None, 1)


class Provisional:
    """The run's Result so far, counting how often it was assembled."""

    def __init__(self, result: Result) -> None:
        self.result, self.calls = result, 0

    def __call__(self) -> Result:
        self.calls += 1
        return self.result


def _watch(*rivals: tuple[Measured, ...], min_steps: tuple[int, int] = (2, 4)) -> RungWatch:
    return RungWatch(plan_for(Continuation(DURATIONS, rivals, OBJECTIVES), min_steps))


RUN = make_result(1000.0, interval_rates=[1000.0] * 5, peak_memory_bytes=100_000_000)
FASTER = Measured("faster", (2000.0, -100_000_000), (0.0, 0.0))  # twice as fast, same memory


def test_nothing_is_measured_before_a_rungs_duration_and_minimum_steps() -> None:
    watch, provisional = _watch((), ()), Provisional(RUN)
    assert not watch.at_sample_point(_record((0.9, 5)), provisional)
    assert not watch.at_sample_point(_record((1.1, 1)), provisional)  # 1 s, but 1 step of 2
    assert provisional.calls == 0 and watch.reached == []
    assert not watch.at_sample_point(_record((1.1, 1), (1.3, 1)), provisional)
    assert provisional.calls == 1 and [r.config.duration_s for r in watch.reached] == [1.0]
    assert watch.reached[0].config.min_steps == 2


def test_rungs_passed_at_one_sample_point_are_each_measured_there() -> None:
    watch, provisional = _watch((), ()), Provisional(RUN)
    assert not watch.at_sample_point(_record((3.5, 10)), provisional)
    assert [r.config.duration_s for r in watch.reached] == [1.0, 3.0]
    assert not watch.at_sample_point(
        _record((3.5, 10), (9.2, 20)), provisional
    )  # no rung below the last left
    assert provisional.calls == 2
    final = make_result(1000.0)
    assert watch.results(final) == [*watch.reached, final]


def test_a_run_beaten_at_a_rung_stops_there_and_its_own_result_is_that_rungs() -> None:
    watch, provisional = _watch((), (FASTER,)), Provisional(RUN)
    assert not watch.at_sample_point(_record((1.2, 5)), provisional)
    assert watch.at_sample_point(_record((1.2, 5), (3.1, 10)), provisional) and watch.stopped
    final = make_result(990.0)
    first, own = watch.results(final)
    assert first is watch.reached[0] and own.run_id == final.run_id
    assert (own.config.duration_s, own.config.min_steps) == (3.0, 4)


def test_within_noise_or_unreadable_it_goes_on() -> None:
    close = Measured("close", (1001.0, -100_000_000), (50.0, 0.0))  # ahead by less than its noise
    assert not _watch((close,), ()).at_sample_point(_record((1.2, 5)), Provisional(RUN))
    unread = make_result(1000.0, peak_memory_bytes=None)
    assert not _watch((FASTER,), ()).at_sample_point(_record((1.2, 5)), Provisional(unread))
