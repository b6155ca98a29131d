"""RateTracker against hand-computed sequences with a fake clock."""

import pytest

from flowrate.measure.rate import RateTracker


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_first_read_is_local_throughput_and_global_rate() -> None:
    clock = FakeClock()
    tracker = RateTracker(clock=clock)
    clock.now = 10.0
    tracker.start()
    tracker.add(64)
    tracker.add(64)
    clock.now = 12.0
    reading = tracker.read()
    assert reading.samples == 128
    assert reading.seconds == 2.0
    assert reading.local_samples_per_sec == 64.0
    assert reading.rate_samples_per_sec == 64.0  # Rate_1 = local_1
    assert reading.global_samples_per_sec == 64.0
    assert reading.elapsed_s == 2.0


def test_smoothing_follows_the_cerebras_recurrence() -> None:
    # local: 100, 300, 50 samples/s over 1 s, 1 s, 2 s
    # Rate:  100; 0.6*300 + 0.4*100 = 220; 0.6*50 + 0.4*220 = 118
    # Global: 100/1; 400/2; 500/4
    clock = FakeClock()
    tracker = RateTracker(smoothing=0.4, clock=clock)
    tracker.start()
    expected = [
        (1.0, 100, 100.0, 100.0, 100.0),
        (2.0, 300, 300.0, 220.0, 200.0),
        (4.0, 100, 50.0, 118.0, 125.0),
    ]
    for now, samples, local, smoothed, global_rate in expected:
        tracker.add(samples)
        clock.now = now
        reading = tracker.read()
        assert reading.local_samples_per_sec == pytest.approx(local, rel=1e-12)
        assert reading.rate_samples_per_sec == pytest.approx(smoothed, rel=1e-12)
        assert reading.global_samples_per_sec == pytest.approx(global_rate, rel=1e-12)
    assert tracker.total_samples == 500


def test_zero_smoothing_is_plain_local_rate() -> None:
    clock = FakeClock()
    tracker = RateTracker(smoothing=0.0, clock=clock)
    tracker.start()
    for now, samples in [(1.0, 10), (2.0, 30)]:
        tracker.add(samples)
        clock.now = now
        reading = tracker.read()
    assert reading.rate_samples_per_sec == 30.0
    assert reading.global_samples_per_sec == 20.0


def test_start_resets_everything() -> None:
    clock = FakeClock()
    tracker = RateTracker(clock=clock)
    tracker.start()
    tracker.add(1000)
    clock.now = 1.0
    tracker.read()
    clock.now = 5.0
    tracker.start()
    tracker.add(10)
    clock.now = 6.0
    reading = tracker.read()
    assert reading.rate_samples_per_sec == 10.0
    assert reading.global_samples_per_sec == 10.0
    assert tracker.total_samples == 10


def test_read_before_start_and_bad_smoothing_are_errors() -> None:
    with pytest.raises(RuntimeError):
        RateTracker().read()
    with pytest.raises(ValueError):
        RateTracker(smoothing=1.0)
