"""`flowrate sweep` as text: the status line of each point, the summary and dry-run tables, and
the lines around them.

Pure: specs, points and reports in, strings and rows out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from flowrate.campaigns.sweep.spec import describe
from flowrate.units import counted, duration, rate

if TYPE_CHECKING:
    from flowrate.campaigns.sweep.run import PointReport, SweepProgress, SweepStart
    from flowrate.campaigns.sweep.spec import PlannedPoint, SweepSpec
    from flowrate.results.store import SweepPoint


def title(name: str, sweep_id: str) -> str:
    """'sweep NAME (ID)', or 'sweep sweep-ID' when the name is the default one."""
    return f"sweep {name}" if name == f"sweep-{sweep_id}" else f"sweep {name} ({sweep_id})"


def points(count: int) -> str:
    return f"{count} point" if count == 1 else f"{count} points"


def left(progress: SweepProgress) -> str:
    """'3 left, about 2 min 10 s' (the time once a point has run in this session), or ''."""
    if not progress.left:
        return ""
    if progress.seconds_left is None:
        return f"{progress.left} left"
    return f"{progress.left} left, about {duration(progress.seconds_left)}"


def begin_line(start: SweepStart) -> str:
    if start.recorded:
        return (
            f"resuming {title(start.name, start.sweep_id)}: {start.recorded} of {start.total} points recorded"
        )
    return f"{title(start.name, start.sweep_id)}: {points(start.total)}, each in a fresh process"


def point_label(index: int, total: int, params: Mapping[str, Any]) -> str:
    return f"point {index}/{total} {describe(params)}"


def recorded_line(report: PointReport, total: int, progress: SweepProgress) -> tuple[str, bool]:
    """A point's outcome as one line, and whether it is a warning (a failure other than memory)."""
    where = point_label(report.index, total, report.params)
    if report.status == "done" and report.decode_tokens_per_sec is not None:  # a generation
        line = (
            f"{where}: {rate(report.decode_tokens_per_sec)} decode tokens/s, TTFT {_ms(report.ttft_s)} "
            f"(run {report.run_id})"
        )
    elif report.status == "done":
        line = f"{where}: {rate(report.samples_per_sec)} samples/s (run {report.run_id})"
    elif report.status == "skipped":
        line = f"{where}: {report.reason}"
    elif report.out_of_memory:
        line = f"{where}: failed: out of memory (larger batches of this branch are skipped)"
    else:
        return f"{where} failed: {report.reason}", True
    still = left(progress)
    return (f"{line}; {still}" if still else line), False


def interrupted_line(spec: SweepSpec, recorded: int, total: int) -> str:
    return (
        f"{title(spec.label, spec.sweep_id)} interrupted: {recorded} of {counted(total, 'point')} "
        "recorded; run the same command to resume"
    )


def failed_message(failed: Sequence[PointReport], total: int) -> str:
    which = ", ".join(str(r.index) for r in failed[:10]) + (", …" if len(failed) > 10 else "")
    return (
        f"{len(failed)} of {counted(total, 'point')} failed for another reason than memory: point(s) "
        f"{which}; --retry-failed runs them again"
    )


def summary_table(
    reports: Sequence[PointReport], command: str = "run"
) -> tuple[list[str], list[list[str]], tuple[int, ...]]:
    """Every point: its grid values, status, its figures, run and a note; header, rows, right-aligned.

    A run's figure is samples/s; a generation's, decode tokens/s and median TTFT."""
    keys = list(reports[0].params) if reports else []
    generate = command == "generate"
    figures = ["decode tokens/s", "TTFT"] if generate else ["samples/s"]
    rows = []
    for r in reports:
        if r.status != "done":
            shown = [""] * len(figures)
        elif generate:
            shown = [rate(r.decode_tokens_per_sec), _ms(r.ttft_s)]
        else:
            shown = [rate(r.samples_per_sec)]
        rows.append([str(r.index), *(str(r.params.get(k, "")) for k in keys), r.status, *shown])
        rows[-1] += [r.run_id or "", _note(r)]
    right = tuple(range(len(keys) + 2, len(keys) + 2 + len(figures)))
    return ["#", *keys, "status", *figures, "run", "note"], rows, (0, *right)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.4g} ms"


def _note(report: PointReport) -> str:
    if report.status == "done":
        return "recorded earlier" if report.earlier else ""
    if report.out_of_memory:
        return "out of memory"
    return report.reason or ""


def dry_run_line(spec: SweepSpec, planned: Sequence[PlannedPoint], recorded: Mapping[str, SweepPoint]) -> str:
    return (
        f"{title(spec.label, spec.sweep_id)}: {points(len(planned))}, {len(recorded)} recorded; "
        f"base {describe(spec.base) or '(the defaults)'}"
    )


def dry_run_table(
    spec: SweepSpec, planned: Sequence[PlannedPoint], recorded: Mapping[str, SweepPoint]
) -> tuple[list[str], list[list[str]]]:
    """Every planned point with its grid values and whether the store holds it; header and rows."""
    keys = list(spec.grid)
    rows = []
    for point in planned:
        earlier = recorded.get(point.key)
        state = f"recorded: {earlier.status}" if earlier else "to run"
        rows.append([str(point.index), *(str(point.params[k]) for k in keys), state])
    return ["#", *keys, "state"], rows
