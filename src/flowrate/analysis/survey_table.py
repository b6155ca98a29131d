"""A survey's figures as an HTML table, for its card (flowrate.analysis.survey_card) and the
report's section on the surveys among its runs (flowrate.analysis.report).

Each figure is a row: its value, datasheet value, fraction of it (drawn as a bar: 100 px is the
datasheet value), band and verdict, and how it was found or why it is empty; the rows outside
their band are marked. Every string from the record is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence

from flowrate.analysis.html import MISSING, e, note, table, when
from flowrate.analysis.survey_values import band_text, figure_value, value_text, verdict
from flowrate.results.schema import Result
from flowrate.results.sections import SurveyFigure

HEADER = ("figure", "value", "datasheet", "fraction", "band", "verdict", "how / why")


def _fraction_cell(figure: SurveyFigure) -> str:
    if figure.fraction is None:
        return MISSING
    width = max(0.0, min(figure.fraction, 1.0)) * 100
    off = " off" if figure.within_band is False else ""
    return f'<span class="bar{off}" style="width:{width:.0f}px"></span>{figure.fraction:.2f}'


def _how(figure: SurveyFigure) -> str:
    spread = f"CV {figure.cv:.1%}" if figure.cv is not None else None
    return "; ".join(e(p) for p in (figure.detail, spread, figure.reason) if p) or MISSING


def figure_rows(figures: Sequence[SurveyFigure]) -> list[list[str]]:
    """The table's cells (HTML, escaped) for ``figures``."""
    return [
        [
            f"<b>{e(f.name)}</b>",
            e(figure_value(f)),
            e(value_text(f.datasheet, f.unit)),
            _fraction_cell(f),
            e(band_text(f)) or MISSING,
            e(verdict(f)) or MISSING,
            _how(f),
        ]
        for f in figures
    ]


def figures_table(figures: Sequence[SurveyFigure], table_id: str = "figures") -> str:
    outside = ["outside" if f.within_band is False else "" for f in figures]
    rows = figure_rows(figures)
    return table(HEADER, rows, table_id=table_id, numeric=(1, 2, 3), row_classes=outside)


def surveys_section(surveys: Sequence[Result]) -> str:
    """The report's section: each survey's figures under its device, run id and date."""
    if not surveys:
        return note("No survey among these runs.")
    parts = []
    for result in surveys:
        survey = result.survey
        if survey is None:
            continue
        heading = f"{survey.device or '?'}: survey {result.run_id}, {when(result.created_at)}"
        quick = " (--quick)" if survey.quick else ""
        figures = figures_table(survey.figures, f"survey-{result.run_id}")
        parts.append(f"<h3>{e(heading + quick)}</h3>{figures}")
    return "".join(parts)
