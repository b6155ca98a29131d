"""`flowrate compare A B` of two surveys: each figure of both side by side, with B's over A's.

A survey is one measurement of each figure, so there is no test and no verdict: the ratio is
shown as it is (two surveys of one machine differ by their own spread). Surveys are compared with
surveys only; a survey against a training run is refused, as is a side that names several.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from flowrate.errors import ConfigError
from flowrate.results.schema import Result
from flowrate.results.sections import Kind


def is_survey(result: Result) -> bool:
    return result.kind is Kind.SURVEY


def compare_surveys(
    side_a: Sequence[Result], side_b: Sequence[Result], labels: tuple[str, str], output_format: str
) -> None:
    """Print survey A and survey B side by side (table, Markdown or JSON); ConfigError (exit 2)
    when a side is not exactly one survey."""
    from flowrate.analysis.survey_values import paired
    from flowrate.cli import console, survey_text

    for side, label, other in ((side_a, labels[0], side_b), (side_b, labels[1], side_a)):
        kinds = sorted({str(r.kind) for r in side if not is_survey(r)})
        if kinds:
            raise ConfigError(
                "compare",
                f"surveys are compared with surveys only: {label} holds {' and '.join(kinds)} records"
                + (" and the other side is a survey" if any(map(is_survey, other)) else ""),
            )
        if len(side) != 1:
            raise ConfigError("compare", f"{label} names {len(side)} surveys: name one survey a side")
    a, b = side_a[0], side_b[0]
    assert a.survey is not None and b.survey is not None  # a survey record always holds its section
    pairs = paired(a.survey, b.survey)
    names = (a.run_id, b.run_id)
    if output_format == "json":
        console.data(json.dumps(survey_text.comparison_dict(pairs, names), indent=2))
        return
    header, rows = survey_text.comparison_table(pairs, (a.survey, b.survey), names)
    if output_format == "md":
        console.data(survey_text.markdown(header, rows))
    else:
        console.grid(f"survey {a.run_id} → {b.run_id}", header, rows, right_aligned=(1, 2, 3, 4))
    for line in survey_text.comparison_notes(a.survey, b.survey):
        console.status(line)
