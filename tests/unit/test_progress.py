"""The live progress display: time left from the pace so far; silent off a terminal."""

import io

import pytest
from rich.console import Console

from flowrate.cli.progress import LiveProgress, seconds_left
from flowrate.config import RunConfig
from flowrate.results.schema import IntervalRecord


def record(first_step: int, steps: int, elapsed_s: float) -> IntervalRecord:
    return IntervalRecord(
        index=0,
        kind="compute",
        first_step=first_step,
        steps=steps,
        samples=steps * 4,
        seconds=1.0,
        samples_per_sec=123.4,
        rate_samples_per_sec=120.0,
        global_samples_per_sec=110.0,
        elapsed_s=elapsed_s,
    )


def test_seconds_left_for_fixed_steps_extrapolates_the_pace() -> None:
    assert seconds_left(RunConfig(steps=100), steps_done=25, elapsed_s=5.0) == pytest.approx(15.0)
    assert seconds_left(RunConfig(steps=100), steps_done=100, elapsed_s=20.0) == 0.0


def test_seconds_left_waits_for_both_duration_and_min_steps() -> None:
    config = RunConfig(duration_s=10.0, min_steps=50)
    assert seconds_left(config, steps_done=10, elapsed_s=4.0) == pytest.approx(16.0)  # steps bind
    assert seconds_left(config, steps_done=40, elapsed_s=4.0) == pytest.approx(6.0)  # duration binds
    assert seconds_left(config, steps_done=60, elapsed_s=12.0) == 0.0


def test_progress_shows_rate_globalrate_and_time_left_on_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    with LiveProgress(console, RunConfig(duration_s=10.0)) as progress:
        progress(record(0, 10, 1.0))
        progress(record(10, 10, 2.0))
    text = out.getvalue()
    assert "Rate 120" in text and "GlobalRate 110" in text and "8 s left" in text


def test_progress_is_silent_off_a_terminal_when_quiet_and_for_short_runs() -> None:
    for console, enabled, config in (
        (Console(file=io.StringIO(), force_terminal=False), True, RunConfig(duration_s=10.0)),
        (Console(file=io.StringIO(), force_terminal=True), False, RunConfig(duration_s=10.0)),
        (Console(file=io.StringIO(), force_terminal=True), True, RunConfig(steps=10)),
    ):
        with LiveProgress(console, config, enabled=enabled) as progress:
            progress(record(0, 5, 0.1))  # 10 steps at 0.02 s: over before two seconds
        assert console.file.getvalue() == ""  # type: ignore[attr-defined]


def test_off_a_terminal_a_long_run_prints_a_line_at_most_every_heartbeat() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    with LiveProgress(console, RunConfig(duration_s=100.0)) as progress:
        for n, elapsed in enumerate((10.0, 29.0, 31.0, 45.0, 60.0, 62.0), start=1):
            progress(record((n - 1) * 10, 10, elapsed))
    lines = out.getvalue().splitlines()
    assert lines == [
        "timing: 30 steps in 31 s, Rate 120 GlobalRate 110 samples/s, about 69 s left",
        "timing: 60 steps in 62 s, Rate 120 GlobalRate 110 samples/s, about 38 s left",
    ]
