"""`flowrate pareto` as text and JSON: the frontier's table, its JSON, and what was left out; and
the oracle view's (--by AXIS).

Pure: a ParetoResult or OracleView in, rows, a JSON object or lines out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flowrate.cli.runs_text import TAGS_SHOWN, shortened
from flowrate.units import counted, gib, rate

if TYPE_CHECKING:
    from flowrate.analysis.oracle import AxisSlice, ConfigPoint, Estimate, OracleView
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
        return gib(value)
    if metric == "mfu":
        return f"{value:.1%}"
    if metric.endswith("per_sec"):
        return rate(value)
    return f"{value:.4g}"


def excluded_warning(front: ParetoResult | OracleView) -> str | None:
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


# The oracle view (`flowrate pareto --by AXIS`): one row per configuration, grouped by axis value.

DOMINANCE_RULE = (
    "best: the highest on the first objective; tied: within its noise there; dominated: another "
    "configuration is better on some objective and worse on none, where a difference counts when it "
    "exceeds 1% and the 95% half-width of the difference, sqrt(h1² + h2²)"
)


def oracle_title(view: OracleView) -> str:
    configurations = sum(len(s.front) + len(s.dominated) for s in view.slices)
    return (
        f"Best configuration per {view.axis} ({', '.join(str(o) for o in view.objectives)}): "
        f"{counted(configurations, 'configuration')}, values ± their 95% half-width"
    )


def oracle_header(view: OracleView) -> list[str]:
    return [
        "problem",
        view.axis,
        "rank",
        "configuration",
        *(str(o) for o in view.objectives),
        "noise",
        "runs",
    ]


def oracle_right_aligned(view: OracleView) -> tuple[int, ...]:
    return tuple(range(4, 4 + len(view.objectives)))


def oracle_rows(view: OracleView, show_dominated: bool) -> list[list[str]]:
    """Per axis value: the best on the first objective, those tied with it within noise, the rest of
    the frontier (and, with show_dominated, the dominated)."""
    rows = []
    for part in view.slices:
        for rank, point in _ranked(part, show_dominated):
            rows.append(
                [
                    part.problem,
                    str(part.value),
                    rank,
                    _configuration(point, view),
                    *(
                        _with_noise(e, o.metric.name)
                        for e, o in zip(point.estimates, view.objectives, strict=True)
                    ),
                    _noise(point),
                    point.label,
                ]
            )
    return rows


def _ranked(part: AxisSlice, show_dominated: bool) -> list[tuple[str, ConfigPoint]]:
    on_front = {id(p) for p in part.front}
    tied = {id(p) for p in part.tied}
    listed = [part.best, *part.tied, *(p for p in part.front if p is not part.best and id(p) not in tied)]
    if show_dominated:
        shown = {id(p) for p in listed}
        listed += [p for p in part.dominated if id(p) not in shown]
    ranked = []
    for point in listed:
        rank = "best" if point is part.best else "tied" if id(point) in tied else "front"
        if id(point) not in on_front:
            rank = "dominated" if rank == "front" else f"{rank}, dominated"
        ranked.append((rank, point))
    return ranked


def _configuration(point: ConfigPoint, view: OracleView) -> str:
    shown = [k for k in view.varying if k != view.axis]
    return ", ".join(f"{k}={point.settings.get(k)}" for k in shown) or "-"


def _with_noise(estimate: Estimate, metric: str) -> str:
    if estimate.half_width <= 0:
        return _show(estimate.value, metric)
    return f"{_show(estimate.value, metric)} ± {_show(estimate.half_width, metric)}"


def _noise(point: ConfigPoint) -> str:
    """Where the first objective's half-width comes from."""
    source = point.estimates[0].source
    if source == "between-run":
        return f"between {len(point.runs)} runs"
    if source == "pooled":
        return f"pooled, {counted(len(point.runs), 'run')}"
    return "within run" if source == "within-run" else "none"


def oracle_json(view: OracleView) -> dict[str, Any]:
    """The axis, objectives and rule; per problem and axis value, the best on the first objective,
    those tied with it within noise, the frontier and the dominated."""

    def entry(point: ConfigPoint) -> dict[str, Any]:
        figures = {
            o.name: {"value": e.value, "half_width": e.half_width, "source": e.source}
            for o, e in zip(view.objectives, point.estimates, strict=True)
        }
        return {"settings": point.settings, "runs": [r.run_id for r in point.runs], **figures}

    return {
        "axis": view.axis,
        "objectives": [{"metric": o.name, "maximize": o.maximize} for o in view.objectives],
        "varying": view.varying,
        "dominance": DOMINANCE_RULE,
        "slices": [
            {
                "problem": s.problem,
                "value": s.value,
                "best": entry(s.best),
                "tied": [entry(p) for p in s.tied],
                "front": [entry(p) for p in s.front],
                "dominated": [entry(p) for p in s.dominated],
            }
            for s in view.slices
        ],
        "excluded": [{"run_id": r.run_id, "reason": why} for r, why in view.excluded],
        "notes": view.notes,
    }
