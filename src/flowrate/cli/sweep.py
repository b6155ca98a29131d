"""`flowrate sweep`: a grid over run options, each point in a fresh process, recorded as it ends.

The sweep itself (grid, order, out-of-memory skipping, resume) lives in flowrate.campaigns.sweep;
this module parses flags, shows progress and prints the table.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

import click
from rich.progress import ProgressColumn, Task
from rich.text import Text

from flowrate.cli.run import run_options
from flowrate.cli.select import STORE_HELP

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from flowrate.campaigns.sweep import (
        PlannedPoint,
        PointReport,
        SweepProgress,
        SweepSpec,
        SweepStart,
    )
    from flowrate.results.store import SweepPoint

GRID_HELP = (
    "An option to vary and its values (repeatable): a RunConfig field or flag name "
    "(batch_size, precision, mode, problem, size, lr, seq_len, …) or a problem option (m, hidden, …). "
    "Values are a comma list; A..B doubles from A up to B for integers (1..512 is 1,2,4,…,512)."
)


@click.command("sweep")
@run_options
@click.option("-g", "--grid", "grid", multiple=True, metavar="KEY=V1,V2,…", help=GRID_HELP)
@click.option(
    "-f",
    "--file",
    "sweep_file",
    type=click.Path(dir_okay=False),
    help='TOML sweep file: name = "…", a [base] table of run options and a [grid] table of '
    'key = [values] (or "1..512"). Flags override it.',
)
@click.option("--name", help="Name of the sweep (tags its runs sweep:NAME). [default: sweep-<id>]")
@click.option(
    "--store", type=click.Path(dir_okay=False), help="Record the sweep in this store. " + STORE_HELP
)
@click.option("-t", "--tag", "tags", multiple=True, help="Label every recorded run (repeatable).")
@click.option("--retry-failed", is_flag=True, help="Run failed and skipped points of a resumed sweep again.")
@click.option("--dry-run", is_flag=True, help="List the points (and which are recorded); run nothing.")
@click.option(
    "-q", "--quiet", is_flag=True, help="No progress or status lines on stderr (the table still prints)."
)
def command(
    grid: tuple[str, ...],
    sweep_file: str | None,
    name: str | None,
    store: str | None,
    tags: tuple[str, ...],
    retry_failed: bool,
    dry_run: bool,
    quiet: bool,
    sample_shape: int | None,
    **flags: Any,
) -> None:
    """Run a grid of benchmarks, each point in a fresh process, recorded in the results store.

    Every `flowrate run` option sets the base all points share; -g KEY=V1,V2,… (or a --file)
    sets what varies, e.g. -g batch_size=1..512 -g precision=fp32,bf16. Within a branch batch
    sizes run ascending: a point that runs out of memory is recorded failed and the larger
    batches of its branch are recorded skipped. Running the same sweep again resumes it: points
    already recorded are not run again (a new --name starts it afresh).

    Exit codes: 0 every point done (or stopped by memory); 1 some point failed otherwise; 2 bad
    input; 130 interrupted (what was recorded is kept).
    """
    import sys

    from flowrate.campaigns.sweep import load_sweep_file, merge_spec, parse_grid_flags, plan_points
    from flowrate.cli import console
    from flowrate.errors import ConfigError, FlowrateError
    from flowrate.results.store import Store

    try:
        file = load_sweep_file(sweep_file) if sweep_file else None
        spec = merge_spec(_base_from_flags(flags, sample_shape), parse_grid_flags(grid), file, name)
        points = plan_points(spec)
    except ConfigError as mistake:
        from flowrate.config import FLAG_NAMES

        raise ConfigError(FLAG_NAMES.get(mistake.field, mistake.field), mistake.message) from None
    if dry_run:
        _dry_run(spec, points, store)
        return
    from flowrate.campaigns.sweep import run_sweep

    with Store(store) as opened, SweepDisplay(quiet) as display:
        for other in opened.sweeps():
            if other["name"] == spec.label and other["sweep_id"] != spec.sweep_id:
                console.status(
                    f"note: another sweep named {spec.label} ({other['sweep_id']}) is in the store, with "
                    "other options; its points are not reused here",
                    quiet,
                )
        try:
            outcome = run_sweep(
                spec,
                opened,
                tags=tags,
                listener=display,
                retry_failed=retry_failed,
                argv=sys.argv,
                points=points,
            )
        except KeyboardInterrupt:
            display.close()
            recorded = len(opened.sweep_points(spec.sweep_id))
            console.status(
                f"{title(spec.label, spec.sweep_id)} interrupted: {recorded} of {len(points)} points "
                "recorded; run the same command to resume",
            )
            raise
    _summary(outcome.name, outcome.sweep_id, outcome.reports)
    failed = outcome.failed_otherwise
    if failed:
        which = ", ".join(str(r.index) for r in failed[:10]) + (", …" if len(failed) > 10 else "")
        raise FlowrateError(
            f"{len(failed)} of {len(points)} points failed for another reason than memory: point(s) "
            f"{which}; --retry-failed runs them again"
        )


def _base_from_flags(flags: dict[str, Any], sample_shape: int | None) -> dict[str, Any]:
    """The run options given as flags (a flag left out sets nothing, so a file's base shows through)."""
    from flowrate.campaigns.sweep import SAMPLE_SHAPE, parse_base
    from flowrate.cli.run import given_fields

    if not flags.get("measure_peak"):
        flags.pop("measure_peak", None)  # an unset on/off flag is False, not "not given"
    base = parse_base(given_fields(flags, None))
    if sample_shape is not None:
        base[SAMPLE_SHAPE] = sample_shape  # resolved per point: the problem may vary
    return base


class SweepDisplay:
    """Status lines per point (stderr) and, on a terminal, a bar with points and time left."""

    def __init__(self, quiet: bool) -> None:
        from flowrate.cli import console

        self.quiet = quiet
        self.total = 0
        terminal = console.stderr_console().is_terminal
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        if terminal and not quiet:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

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
        from flowrate.cli import console

        self.total = start.total
        if start.recorded:
            console.status(
                f"resuming {title(start.name, start.sweep_id)}: {start.recorded} of {start.total} "
                "points recorded",
                self.quiet,
            )
        else:
            console.status(
                f"{title(start.name, start.sweep_id)}: {_points(start.total)}, each in a fresh process",
                self.quiet,
            )
        if self._progress is not None:
            self._progress.start()
            self._task = self._progress.add_task(
                start.name, total=start.total, completed=start.recorded, finish=None, left=0
            )

    def starting(self, point: PlannedPoint, progress: SweepProgress) -> None:
        from flowrate.campaigns.sweep import describe

        if self._progress is not None and self._task is not None:
            self._progress.update(
                self._task,
                description=f"point {point.index}/{self.total} {describe(point.params)}",
                **_finish(progress),
            )

    def recorded(self, report: PointReport, progress: SweepProgress) -> None:
        from flowrate.campaigns.sweep import describe
        from flowrate.cli import console
        from flowrate.units import rate

        where = f"point {report.index}/{self.total} {describe(report.params)}"
        if report.status == "done":
            line = f"{where}: {rate(report.samples_per_sec)} samples/s (run {report.run_id})"
        elif report.status == "skipped":
            line = f"{where}: {report.reason}"
        elif report.out_of_memory:
            line = f"{where}: failed: out of memory (larger batches of this branch are skipped)"
        else:
            line = ""
            console.warn(f"{where} failed: {report.reason}")
        if line:
            left = _left(progress)
            console.status(f"{line}; {left}" if left else line, self.quiet)
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


def _points(count: int) -> str:
    return f"{count} point" if count == 1 else f"{count} points"


def title(name: str, sweep_id: str) -> str:
    """'sweep NAME (ID)', or 'sweep sweep-ID' when the name is the default one."""
    return f"sweep {name}" if name == f"sweep-{sweep_id}" else f"sweep {name} ({sweep_id})"


def _left(progress: SweepProgress) -> str:
    if not progress.left:
        return ""
    if progress.seconds_left is None:
        return f"{progress.left} left"
    return f"{progress.left} left, about {duration(progress.seconds_left)}"


def duration(seconds: float) -> str:
    """Seconds as people say a wait: 42 s, 3 min 05 s, 1 h 02 min."""
    seconds = max(round(seconds), 0)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def _summary(name: str, sweep_id: str, reports: list[PointReport]) -> None:
    from flowrate.cli import console
    from flowrate.units import rate

    keys = list(reports[0].params) if reports else []
    rows = [
        [
            str(r.index),
            *(str(r.params.get(k, "")) for k in keys),
            r.status,
            rate(r.samples_per_sec) if r.status == "done" else "",
            r.run_id or "",
            _note(r),
        ]
        for r in reports
    ]
    header = ["#", *keys, "status", "samples/s", "run", "note"]
    console.grid(title(name, sweep_id), header, rows, right_aligned=(0, len(keys) + 2))


def _note(report: PointReport) -> str:
    if report.status == "done":
        return "recorded earlier" if report.earlier else ""
    if report.out_of_memory:
        return "out of memory"
    return report.reason or ""


def _dry_run(spec: SweepSpec, points: list[PlannedPoint], store: str | None) -> None:
    """List the points and what the store already holds of them; open (create) nothing."""
    from flowrate.campaigns.sweep import describe
    from flowrate.cli import console
    from flowrate.results.store import Store, store_path

    recorded: dict[str, SweepPoint] = {}
    if store_path(store).exists():
        with Store(store, create=False) as opened:
            recorded = opened.sweep_points(spec.sweep_id)
    keys = list(spec.grid)
    rows = []
    for point in points:
        earlier = recorded.get(point.key)
        state = f"recorded: {earlier.status}" if earlier else "to run"
        rows.append([str(point.index), *(str(point.params[k]) for k in keys), state])
    console.status(
        f"{title(spec.label, spec.sweep_id)}: {_points(len(points))}, {len(recorded)} recorded; "
        f"base {describe(spec.base) or '(the defaults)'}"
    )
    console.grid(f"{title(spec.label, spec.sweep_id)}, dry run", ["#", *keys, "state"], rows, (0,))
