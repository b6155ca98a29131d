"""`flowrate history` as text and JSON: each series point by point, its steps, its regressions.

Pure: Series (or a History) in, rows of cells, lines or a JSON-ready object out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flowrate.units import compact

if TYPE_CHECKING:
    from flowrate.analysis.history import History, Series
    from flowrate.analysis.steps import Step

RIGHT_ALIGNED = (0, 3, 4, 5)


def header(series: Series) -> list[str]:
    columns = [
        "#",
        "commit" if series.ordered_by == "commit" else "run",
        "first recorded",
        "runs",
        "samples/s",
    ]
    return columns + (["fitted level", "step"] if series.fit is not None else [])


def step_text(step: Step) -> str:
    """'-3.1% [-4.0%, -2.2%]'"""
    return f"{step.relative:+.1%} [{step.ci_low:+.1%}, {step.ci_high:+.1%}]"


def rows(series: Series) -> list[list[str]]:
    fit = series.fit
    steps = {s.index: s for s in fit.steps} if fit is not None else {}
    table = []
    for i, p in enumerate(series.points):
        row = [
            str(i + 1),
            p.label,
            p.first_recorded[:19].replace("T", " "),
            str(p.runs),
            compact(p.samples_per_sec),
        ]
        if fit is not None:
            level = next(v for (a, b), v in zip(fit.bounds, fit.levels, strict=True) if a <= i < b)
            row += [compact(level), step_text(steps[i]) if i in steps else ""]
        table.append(row)
    return table


def step_lines(series: Series) -> list[str]:
    """One line per step, naming the first point after it; or that there is none."""
    fit = series.fit
    if fit is None:
        return []
    what = "commit" if series.ordered_by == "commit" else "run"
    lines = [
        f"step before {what} {series.points[s.index].label} (point {s.index + 1}): {step_text(s)}, "
        f"{compact(s.before)} → {compact(s.after)} samples/s"
        for s in fit.steps
    ]
    noise = f"noise between runs {fit.sigma:.1%}, penalty {fit.penalty:.1f}"
    return lines or [f"no steps in {len(series.points)} points ({noise})"]


def regression_message(series: Series, index: int, fail_pct: float) -> str:
    assert series.fit is not None  # regressions() found one
    step = series.fit.steps[index]
    return (
        f"{series.title}: samples/s dropped {step_text(step)} before "
        f"{series.points[step.index].label} and has not recovered, more than the {fail_pct:g}% "
        "--fail-if-slower allows"
    )


def gate_message(history: History, fail_pct: float) -> str:
    """Every regression over --fail-if-slower, in one line."""
    return "; ".join(regression_message(s, k, fail_pct) for s, k in history.regressions)


def to_json(series: list[Series]) -> list[dict[str, Any]]:
    out = []
    for s in series:
        entry: dict[str, Any] = {
            "problem": s.problem,
            "configuration": s.configuration,
            "machine": s.machine,
            "ordered_by": s.ordered_by,
            "notes": s.notes,
            "points": [p.__dict__ for p in s.points],
        }
        if s.fit is not None:
            entry["noise_cv"] = s.fit.sigma
            entry["steps"] = [
                {**step.__dict__, "first_after": s.points[step.index].label} for step in s.fit.steps
            ]
        out.append(entry)
    return out


def skipped_line(series: Series) -> str:
    only = series.points[0]
    return f"{series.title}: one point ({only.label}), no history to fit; left out"
