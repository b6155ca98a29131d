"""`flowrate runs` and `flowrate show` as text: the runs, tags and sweeps tables, one run's rows.

Pure: stored runs or a Result in, headers and rows out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from flowrate.cli.check_text import fidelity_rows
from flowrate.cli.run_text import summary_rows
from flowrate.units import gib, rate

if TYPE_CHECKING:
    from flowrate.results.schema import Result
    from flowrate.results.store import StoredRun

RUNS_HEADER = [
    "run",
    "created (UTC)",
    "tags",
    "problem",
    "run",
    "device",
    "batch",
    "samples/s",
    "MFU",
    "samples/J",
    "peak mem",
    "loss",
]
RUNS_RIGHT_ALIGNED = (6, 7, 8, 9, 10, 11)
RUNS_WHOLE = (0,)  # the run id: a narrow terminal cuts other columns, never it
TAGS_SHOWN = 40  # characters of a run's tags a table shows (a long tag must not swallow it)
SWEEPS_HEADER = ["sweep", "name", "created (UTC)", "done", "failed", "skipped"]


def runs_rows(runs: Sequence[StoredRun]) -> list[list[str]]:
    """One row per run: id, when, tags, what ran where, and its headline figures."""
    return [
        [
            r.run_id,
            r.created_at[:19].replace("T", " "),
            shortened(", ".join(r.tags), TAGS_SHOWN),
            f"{r.problem}/{r.size}" if r.size else r.problem,
            " ".join(x for x in (r.mode, r.precision, r.execution) if x),
            r.device_name or "",
            str(r.batch_size or ""),
            rate(r.samples_per_sec),
            "" if r.mfu is None else f"{r.mfu:.1%}",
            "" if r.samples_per_joule is None else f"{r.samples_per_joule:.4g}",
            "" if r.peak_memory_bytes is None else gib(r.peak_memory_bytes),
            "" if r.final_loss is None else f"{r.final_loss:.4f}",
        ]
        for r in runs
    ]


def runs_json(runs: Sequence[StoredRun]) -> list[dict[str, Any]]:
    """The runs' headline figures as JSON objects (the full result is left to `show --json`)."""
    return [{k: v for k, v in vars(r).items() if k != "result_json"} for r in runs]


def shortened(text: str, most: int) -> str:
    """``text`` cut to ``most`` characters, its end marked with …."""
    return text if len(text) <= most else text[: most - 1] + "…"


def tags_rows(tags: Mapping[str, int]) -> list[list[str]]:
    return [[shortened(tag, TAGS_SHOWN), str(n)] for tag, n in tags.items()]


def sweeps_rows(sweeps: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    return [
        [s["sweep_id"], s["name"], s["created_at"][:19], str(s["done"]), str(s["failed"]), str(s["skipped"])]
        for s in sweeps
    ]


def show_rows(result: Result, tags: Sequence[str]) -> list[tuple[str, str]]:
    """One recorded run: when and how it was tagged, its summary (a check's, for a check), and the
    command that made it."""
    if result.survey is not None:  # `flowrate survey`
        from flowrate.cli.survey_text import survey_rows

        rows = survey_rows(result.survey)
    elif result.generation is not None:  # `flowrate generate`
        from flowrate.cli.generate_text import generation_rows

        rows = generation_rows(result)
    elif result.serving is not None:  # `flowrate serve-bench`
        from flowrate.cli.serve_bench_text import rows as serving_rows

        rows = serving_rows(result.serving)  # with --find-max-rate: every point and the rate found
    else:
        rows = fidelity_rows(result) if result.fidelity else summary_rows(result)
    rows.insert(0, ("recorded", f"{result.created_at}" + (f"  tags {', '.join(tags)}" if tags else "")))
    command_line = result.environment.command_line
    if command_line:
        rows.append(("command", " ".join(str(part) for part in command_line)))
    return rows
