"""`flowrate compare A B` of two surveys, shown: each figure of both side by side, with B's over
A's (flowrate.analysis.compare_recorded.SurveyComparison), as a table, Markdown or JSON.

A survey is one measurement of each figure, so there is no test and no verdict: the ratio is
shown as it is (two surveys of one machine differ by their own spread).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flowrate.analysis.compare_recorded import SurveyComparison


def show_surveys(compared: SurveyComparison, output_format: str) -> None:
    """Print survey A and survey B side by side (table, Markdown or JSON), then what to keep in
    mind reading the ratios."""
    from flowrate.cli import console, survey_text

    a, b = compared.run_ids
    if output_format == "json":
        console.data(json.dumps(survey_text.comparison_dict(compared.pairs, compared.run_ids), indent=2))
        return
    header, rows = survey_text.comparison_table(compared.pairs, (compared.a, compared.b), compared.run_ids)
    if output_format == "md":
        console.data(survey_text.markdown(header, rows))
    else:
        console.grid(f"survey {a} → {b}", header, rows, right_aligned=(1, 2, 3, 4))
    for line in survey_text.comparison_notes(compared.a, compared.b):
        console.status(line)
