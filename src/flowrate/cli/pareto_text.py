"""`flowrate pareto` as text and JSON: the frontier's table, its JSON, and what was left out.

Pure: a ParetoResult in, rows, a JSON object or lines out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flowrate.cli.runs_text import TAGS_SHOWN, shortened
from flowrate.units import counted, rate, si

if TYPE_CHECKING:
    from flowrate.analysis.pareto import ParetoResult
    from flowrate.results.store import StoredRun

_HEADER = ["run", "problem", "precision", "execution", "device", "batch", "tags"]


def header(front: ParetoResult) -> list[str]:
    return [*_HEADER, *(str(o) for o in front.objectives)]


def right_aligned(front: ParetoResult) -> tuple[int, ...]:
    """batch and every objective's column."""
    return tuple(range(5, len(_HEADER) + len(front.objectives)))


def title(front: ParetoResult) -> str:
    considered = len(front.front) + len(front.dominated)
    return f"Pareto frontier: {len(front.front)} of {counted(considered, 'run')}"


def rows(front: ParetoResult, show_dominated: bool) -> list[list[str]]:
    """The frontier's runs (and, with show_dominated, the dominated ones, marked so)."""
    listed = front.front + (front.dominated if show_dominated else [])
    return [_row(run, front) for run in listed]


def _row(run: StoredRun, front: ParetoResult) -> list[str]:
    values = [
        _show(v, o.metric.name) for v, o in zip(front.values[run.run_id], front.objectives, strict=True)
    ]
    problem = f"{run.problem}/{run.size}" if run.size else run.problem
    star = "" if run in front.front else " (dominated)"
    return [
        run.run_id + star,
        problem,
        run.precision or "",
        run.execution or "",
        run.device_name or "",
        str(run.batch_size or ""),
        shortened(", ".join(run.tags), TAGS_SHOWN),
        *values,
    ]


def _show(value: float, metric: str) -> str:
    if metric == "peak_memory_bytes":
        return si(value, "B")
    if metric == "mfu":
        return f"{value:.1%}"
    if metric.endswith("per_sec"):
        return rate(value)
    return f"{value:.4g}"


def excluded_warning(front: ParetoResult) -> str | None:
    """How many runs were left out, and why, or None."""
    if not front.excluded:
        return None
    reasons = sorted({why for _, why in front.excluded})
    return f"{counted(len(front.excluded), 'run')} left out: {'; '.join(reasons)}"


def to_json(front: ParetoResult) -> dict[str, Any]:
    """The objectives, the frontier, the dominated and the excluded runs, and the notes."""

    def entry(run: StoredRun) -> dict[str, Any]:
        values = front.values[run.run_id]
        return {"run_id": run.run_id, **{o.name: v for o, v in zip(front.objectives, values, strict=True)}}

    return {
        "objectives": [{"metric": o.name, "maximize": o.maximize} for o in front.objectives],
        "front": [entry(r) for r in front.front],
        "dominated": [entry(r) for r in front.dominated],
        "excluded": [{"run_id": r.run_id, "reason": why} for r, why in front.excluded],
        "notes": front.notes,
    }
