"""Progress of a run: current Rate, GlobalRate and the time left, at sample points.

On a terminal (stderr) it is a live, transient display, shown once a run promises to last more
than a couple of seconds; the summary table replaces it when the run ends. Off a terminal (a CI
log, a pipe, a file) a long run still says how it goes: one plain line at the first sample point
past HEARTBEAT_S of timed work and at most one per HEARTBEAT_S after, so a run that seems silent
is never mistaken for a hung one, and short runs print nothing. --quiet shows neither.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from flowrate.config import RunConfig
from flowrate.results.schema import IntervalRecord
from flowrate.units import rate

# Runs expected to end sooner than this show no progress display.
SHOW_AFTER_S = 2.0
# Off a terminal, the most often a progress line is printed (seconds of timed work).
HEARTBEAT_S = 30.0


def seconds_left(config: RunConfig, steps_done: int, elapsed_s: float) -> float:
    """Time until the plan is met, extrapolated from the pace so far."""
    per_step = elapsed_s / steps_done if steps_done else 0.0
    if config.steps is not None:
        return max(config.steps - steps_done, 0) * per_step
    return max(config.duration_s - elapsed_s, (config.min_steps - steps_done) * per_step, 0.0)


class LiveProgress:
    """Feed it IntervalRecords (it is an on_interval listener); use it as a context manager."""

    def __init__(self, console: Console, config: RunConfig, enabled: bool = True) -> None:
        self.config = config
        self.console = console
        self.enabled = enabled and console.is_terminal
        self.lines = enabled and not console.is_terminal  # a heartbeat line now and then
        self._last_line_s = 0.0
        self._progress = Progress(
            TextColumn("[bold]timing"),
            BarColumn(),
            TextColumn("{task.fields[figures]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._task: TaskID | None = None

    def __call__(self, record: IntervalRecord) -> None:
        if not (self.enabled or self.lines):  # --quiet: nothing to do at a sample point
            return
        done = record.first_step + record.steps
        left = seconds_left(self.config, done, record.elapsed_s)
        if self.lines and record.elapsed_s - self._last_line_s >= HEARTBEAT_S:
            self._last_line_s = record.elapsed_s
            self.console.print(
                f"timing: {done} steps in {record.elapsed_s:.0f} s, Rate {rate(record.rate_samples_per_sec)} "
                f"GlobalRate {rate(record.global_samples_per_sec)} samples/s, about {left:.0f} s left",
                highlight=False,
                soft_wrap=True,
            )
        if not self.enabled:
            return
        if self._task is None:
            if record.elapsed_s + left < SHOW_AFTER_S:
                return
            self._progress.start()
            self._task = self._progress.add_task("timing", total=1.0, figures="")
        total = record.elapsed_s + left
        figures = (
            f"Rate {rate(record.rate_samples_per_sec)}  GlobalRate {rate(record.global_samples_per_sec)} "
            f"samples/s  {left:.0f} s left"
        )
        self._progress.update(
            self._task, completed=record.elapsed_s / total if total else 1.0, figures=figures
        )

    def __enter__(self) -> LiveProgress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._task is not None:
            self._progress.stop()
