"""A survey's figures as people read them, and two surveys' figures paired row by row.

Pure functions shared by the terminal (flowrate.cli.survey_text) and the HTML card
(flowrate.analysis.survey_card).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flowrate.results.sections import Survey, SurveyFigure
from flowrate.units import si

DASH = "—"
SPREADS = 2  # two surveys agree when their ratio is within this many combined CVs of 1


def figure_value(figure: SurveyFigure) -> str:
    """A figure's value in its unit (seconds per call in µs), or — where it has none."""
    return value_text(figure.value, figure.unit)


def value_text(value: float | None, unit: str) -> str:
    """``value`` in ``unit`` as a survey prints it: seconds in µs, the rest with SI prefixes."""
    if value is None:
        return DASH
    if unit == "s":
        return f"{value * 1e6:.3g} µs"
    return si(value, unit)


def band_text(figure: SurveyFigure) -> str:
    """'[0.3, 1] of datasheet', '[0.2, 500] µs', or '' for a figure without a band."""
    low, high = figure.band_low, figure.band_high
    if low is None or high is None:
        return ""
    if figure.datasheet:
        return f"[{low:.2g}, {high:.2g}] of datasheet"
    if figure.unit == "s":
        return f"[{low * 1e6:.3g}, {high * 1e6:.3g}] µs"
    return f"[{si(low, figure.unit)}, {si(high, figure.unit)}]"


def verdict(figure: SurveyFigure) -> str:
    """'ok', 'OUTSIDE', 'not checked' (a band, no value) or '' (no band)."""
    if not band_text(figure):
        return ""
    return {True: "ok", False: "OUTSIDE", None: "not checked"}[figure.within_band]


@dataclass(frozen=True)
class FigurePair:
    """One row of two surveys side by side: the figure in each (None where a survey lacks the
    row) and B's value over A's where both have one."""

    name: str
    unit: str
    a: SurveyFigure | None
    b: SurveyFigure | None

    @property
    def ratio(self) -> float | None:
        if self.a is None or self.b is None or not self.a.value or self.b.value is None:
            return None
        return self.b.value / self.a.value

    @property
    def within_spread(self) -> bool | None:
        """Whether the two figures agree within their own spread: |B/A - 1| <= 2 sqrt(cv_A² +
        cv_B²), each cv its measurement's over its intervals; None where a cv or value is missing."""
        ratio = self.ratio
        if ratio is None or self.a is None or self.b is None or self.a.cv is None or self.b.cv is None:
            return None
        return abs(ratio - 1) <= SPREADS * math.hypot(self.a.cv, self.b.cv)


def paired(a: Survey, b: Survey) -> list[FigurePair]:
    """A's rows in A's order, then the rows only B has, in B's order."""
    in_a = {f.name: f for f in a.figures}
    in_b = {f.name: f for f in b.figures}
    names = [f.name for f in a.figures] + [f.name for f in b.figures if f.name not in in_a]
    return [FigurePair(n, (in_a.get(n) or in_b[n]).unit, in_a.get(n), in_b.get(n)) for n in names]
