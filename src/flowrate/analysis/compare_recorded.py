"""`flowrate compare A B` over recorded runs: the runs' comparison, or two surveys side by side.

Runs are compared by flowrate.results.compare, with the store's between-run noise for their
configuration on their machine (flowrate.results.noise) standing in for a side with too few runs
of its own, where asked. A survey is one measurement of each figure, so two surveys are paired
figure by figure (flowrate.analysis.survey_values) with no test and no verdict; a survey is
compared with a survey only, one a side. The two sides of one comparison within a budget are
judged as it judged them, paired by block or by pair, where every run carries its design's tag
(flowrate.results.run_design).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from flowrate.analysis.survey_values import FigurePair, paired
from flowrate.errors import ConfigError
from flowrate.measure.stats import DEFAULT_ALPHA
from flowrate.results.compare import Comparison, compare
from flowrate.results.noise import history_in_store
from flowrate.results.run_design import RunDesign, TaggedRun, in_run_order, recorded_design
from flowrate.results.schema import Result
from flowrate.results.sections import Kind, Survey
from flowrate.results.verdict import DEFAULT_MIN_EFFECT


@dataclass(frozen=True)
class Judging:
    """How a difference is judged: the test over one value per run, its level, the least
    relative difference called, and whether the store's noise for the configuration is used."""

    test: str = "welch"
    alpha: float = DEFAULT_ALPHA
    min_effect: float = DEFAULT_MIN_EFFECT  # 0.01 = 1%
    history: bool = True


@dataclass(frozen=True)
class SurveyComparison:
    """Two surveys' figures paired row by row (A's rows first), with each survey's run id."""

    a: Survey
    b: Survey
    run_ids: tuple[str, str]
    pairs: list[FigurePair]


def is_survey(result: Result) -> bool:
    return result.kind is Kind.SURVEY


def compare_recorded(
    store: str | os.PathLike[str] | None,
    tagged_a: Sequence[TaggedRun],
    tagged_b: Sequence[TaggedRun],
    labels: tuple[str, str],
    judging: Judging,
) -> Comparison | SurveyComparison:
    """B's runs against the baseline A's (each side newest first, as the store lists runs), judged
    as ``judging`` says (with ``judging.history``, the noise ``store`` records for their
    configuration) and, where they are one comparison's sides, paired as it paired them
    (flowrate.results.run_design); or, where a side holds a survey, the two surveys paired
    (compare_surveys)."""
    side_a, side_b = [r.result for r in tagged_a], [r.result for r in tagged_b]
    if any(map(is_survey, (*side_a, *side_b))):
        return compare_surveys(side_a, side_b, labels)
    design = recorded_design(tagged_a, tagged_b)
    if design is not None:
        side_a, side_b = in_run_order(tagged_a), in_run_order(tagged_b)
    known = history_in_store(store, side_a, side_b) if judging.history else None
    return compare(
        side_a,
        side_b,
        test=judging.test,
        alpha=judging.alpha,
        min_effect=judging.min_effect,
        labels=labels,
        history=known,
        blocks=design is not None,
        turns=design is RunDesign.TURNS,
    )


def compare_surveys(
    side_a: Sequence[Result], side_b: Sequence[Result], labels: tuple[str, str]
) -> SurveyComparison:
    """Survey A and survey B paired; ConfigError (exit 2) when a side is not exactly one survey."""
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
    return SurveyComparison(a.survey, b.survey, (a.run_id, b.run_id), paired(a.survey, b.survey))
