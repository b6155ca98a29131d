"""What `flowrate survey` and `flowrate show` print of a survey: pure functions returning lines."""

from __future__ import annotations

from flowrate.results.sections import Survey, SurveyFigure
from flowrate.units import si


def figure_value(figure: SurveyFigure) -> str:
    """A figure's value in its unit (seconds per call in µs), or — where it has none."""
    if figure.value is None:
        return "—"
    if figure.unit == "s":
        return f"{figure.value * 1e6:.3g} µs"
    return si(figure.value, figure.unit)


def _band(figure: SurveyFigure) -> str:
    low, high = figure.band_low, figure.band_high
    if low is None or high is None:
        return ""
    if figure.datasheet:
        return f"[{low:.2g}, {high:.2g}] of datasheet"
    if figure.unit == "s":
        return f"[{low * 1e6:.3g}, {high * 1e6:.3g}] µs"
    return f"[{si(low, figure.unit)}, {si(high, figure.unit)}]"


def figure_line(figure: SurveyFigure, shared: str | None = None) -> str:
    """'758 TFLOP/s  0.77 of 989 TFLOP/s datasheet  band [0.3, 1] of datasheet: ok  (best of …)'."""
    parts = [figure_value(figure)]
    if figure.fraction is not None and figure.datasheet:
        parts.append(f"{figure.fraction:.2f} of {si(figure.datasheet, figure.unit)} datasheet")
    band = _band(figure)
    if band:
        verdict = {True: "ok", False: "OUTSIDE", None: "not checked"}[figure.within_band]
        parts.append(f"band {band}: {verdict}")
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


def outside_message(figures: list[SurveyFigure]) -> str:
    """--strict's one line: the figures outside their bands."""
    named = "; ".join(f"{f.name} {figure_value(f)} outside {_band(f)}" for f in figures)
    return f"--strict: {len(figures)} figure(s) outside their band: {named}"
