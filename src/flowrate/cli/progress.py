"""Live progress on a terminal: current Rate, GlobalRate and the time left, updated per sample point.

Shown only when stderr is a terminal and --quiet is not given, and only once a run promises to
last more than a couple of seconds, so CI logs and piped output stay clean. It is transient: the
summary table replaces it when the run ends.
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
        self.enabled = enabled and console.is_terminal
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
        if not self.enabled:
            return
        done = record.first_step + record.steps
        left = seconds_left(self.config, done, record.elapsed_s)
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
