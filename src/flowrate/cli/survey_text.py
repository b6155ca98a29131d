"""What `flowrate survey`, `flowrate show` and `flowrate compare` print of surveys: pure functions
returning lines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from flowrate.analysis.survey_values import (
    SPREADS,
    FigurePair,
    band_text,
    figure_value,
    value_text,
    verdict,
)
from flowrate.results.sections import Survey, SurveyFigure
from flowrate.units import si

if TYPE_CHECKING:
    from flowrate.execution.launch import Launch


def start_line(launch: Launch | None, quick: bool) -> str:
    """'surveying this machine (quick)', or under torchrun 'surveying the collectives of N ranks'."""
    where = f"the collectives of {launch.world_size} ranks" if launch else "this machine"
    return f"surveying {where}" + (" (quick)" if quick else "")


def progress_line(figure: SurveyFigure) -> str:
    """A figure as it is measured: its name and its value (— where it has none)."""
    return f"{figure.name}: {figure_value(figure)}"


def figure_line(figure: SurveyFigure, shared: str | None = None) -> str:
    """'758 TFLOP/s  0.77 of 989 TFLOP/s datasheet  band [0.3, 1] of datasheet: ok  (best of …)'."""
    parts = [figure_value(figure) + (f" (CV {figure.cv:.1%})" if figure.cv is not None else "")]
    if figure.fraction is not None and figure.datasheet:
        parts.append(f"{figure.fraction:.2f} of {si(figure.datasheet, figure.unit)} datasheet")
    band = band_text(figure)
    if band:
        parts.append(f"band {band}: {verdict(figure)}")
    line = "  ".join(parts)
    if figure.detail:
        line += f"  ({figure.detail})"
    reason = "no datasheet value" if shared is not None and figure.reason == shared else figure.reason
    if reason:
        line += f"; {reason}" if figure.value is not None else f" ({reason})"
    return line


def survey_rows(survey: Survey) -> list[tuple[str, str]]:
    """One row per figure, then what the survey was; a reason most figures share (no datasheet for
    this device) is said once, in a row of its own."""
    reasons = [f.reason for f in survey.figures if f.reason]
    shared = max(set(reasons), key=reasons.count) if reasons else None
    if shared is not None and reasons.count(shared) < 2:
        shared = None
    rows = [(figure.name, figure_line(figure, shared)) for figure in survey.figures]
    if shared is not None:
        rows.append(("datasheet", shared))
    seconds = survey.seconds_per_measurement
    timed = f", {seconds:g} s per measurement" if seconds is not None else ""
    rows.append(("survey", f"{survey.device or '?'}{', quick' if survey.quick else ''}{timed}"))
    return rows


def outside_message(figures: Sequence[SurveyFigure]) -> str:
    """--strict's one line: the figures outside their bands."""
    named = "; ".join(f"{f.name} {figure_value(f)} outside {band_text(f)}" for f in figures)
    return f"--strict: {len(figures)} figure(s) outside their band: {named}"


def comparison_table(
    pairs: list[FigurePair], surveys: tuple[Survey, Survey], run_ids: tuple[str, str]
) -> tuple[list[str], list[list[str]]]:
    """Two surveys' figures side by side: the header and one row per figure (name, A, B, B/A,
    whether they agree within their spread)."""
    devices = (f"{s.device or '?'} ({r})" for s, r in zip(surveys, run_ids, strict=True))
    header = ["figure", *devices, "B/A", "within spread"]
    rows = [
        [
            p.name,
            value_text(p.a.value if p.a else None, p.unit),
            value_text(p.b.value if p.b else None, p.unit),
            f"{p.ratio:.3g}" if p.ratio is not None else "—",
            {True: "yes", False: "NO", None: "—"}[p.within_spread],
        ]
        for p in pairs
    ]
    return header, rows


def comparison_notes(a: Survey, b: Survey) -> list[str]:
    """What to keep in mind reading the ratios."""
    notes = [
        "B/A: survey B's figure over A's; launch rows are seconds per call (under 1: B is faster)",
        f"within spread: |B/A - 1| <= {SPREADS} x the two measurements' CVs combined (root sum of squares)",
    ]
    if a.quick != b.quick or a.seconds_per_measurement != b.seconds_per_measurement:
        timed = [f"{'quick, ' if s.quick else ''}{s.seconds_per_measurement or 0:g} s each" for s in (a, b)]
        notes.append(f"the surveys were timed differently (A: {timed[0]}; B: {timed[1]})")
    return notes


def comparison_dict(pairs: list[FigurePair], run_ids: tuple[str, str]) -> dict[str, object]:
    """The comparison as JSON: each figure's unit, both values and the ratio."""
    return {
        "a": run_ids[0],
        "b": run_ids[1],
        "figures": [
            {
                "name": p.name,
                "unit": p.unit,
                "a": p.a.value if p.a else None,
                "b": p.b.value if p.b else None,
                "ratio": p.ratio,
                "within_spread": p.within_spread,
            }
            for p in pairs
        ],
    }


def markdown(header: list[str], rows: list[list[str]]) -> str:
    """A Markdown pipe table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)
