"""The live display of `flowrate sweep`: a status line per point on stderr and, on a terminal, a
bar with the points done and the time left. It is the sweep's SweepListener."""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

from rich.progress import BarColumn, Progress, ProgressColumn, Task, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text

from flowrate.cli import console, sweep_text
from flowrate.units import duration

if TYPE_CHECKING:
    from flowrate.campaigns.sweep.run import PointReport, SweepProgress, SweepStart
    from flowrate.campaigns.sweep.spec import PlannedPoint


class SweepDisplay:
    """Status lines per point (stderr) and, on a terminal, a bar with points and time left."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.total = 0
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        if console.stderr_console().is_terminal and not quiet:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.completed:.0f}/{task.total:.0f} points"),
                _TimeLeft(),
                TimeElapsedColumn(),
                console=console.stderr_console(),
                transient=True,
            )

    # the SweepListener hooks
    def begin(self, start: SweepStart) -> None:
        self.total = start.total
        console.status(sweep_text.begin_line(start), self.quiet)
        if self._progress is not None:
            self._progress.start()
            self._task = self._progress.add_task(
                start.name, total=start.total, completed=start.recorded, finish=None, left=0
            )

    def starting(self, point: PlannedPoint, progress: SweepProgress) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(
                self._task,
                description=sweep_text.point_label(point.index, self.total, point.params),
                **_finish(progress),
            )

    def recorded(self, report: PointReport, progress: SweepProgress) -> None:
        line, warning = sweep_text.recorded_line(report, self.total, progress)
        if warning:
            console.warn(line)
        else:
            console.status(line, self.quiet)
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=progress.done, **_finish(progress))

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> SweepDisplay:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _finish(progress: SweepProgress) -> dict[str, Any]:
    """When the sweep should end (monotonic clock), for the bar to count down between points."""
    end = None if progress.seconds_left is None else time.monotonic() + progress.seconds_left
    return {"finish": end, "left": progress.left}


class _TimeLeft(ProgressColumn):
    """Points left and, once a point has run in this session, about how long they take."""

    def render(self, task: Task) -> Text:
        left, finish = task.fields.get("left", 0), task.fields.get("finish")
        if not left:
            return Text("")
        if finish is None:
            return Text(f"{left} left")
        return Text(f"{left} left, about {duration(max(finish - time.monotonic(), 0))}")
