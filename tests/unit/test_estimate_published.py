"""GPU estimates checked on paper: each published case's ratio stays where it was pinned.

A cost-model change that moves a ratio by more than PIN_TOLERANCE fails here until its
recorded_ratio in benchmarks/data/published_gpu_cases.json is re-pinned; a case without a
written explanation must stay within ±30% of its published figure, and a case with one must
still be outside it (else the explanation is stale). The hf: cases build transformers' BERT on
the meta device, a few seconds each.
"""

from __future__ import annotations

import functools
import shlex

import pytest

from estimate_published import CASES, RECORDED, WITHIN, Evaluation, PublishedCase, evaluate

PIN_TOLERANCE = 0.10  # of the recorded ratio


@functools.cache
def _evaluated(name: str) -> Evaluation:
    return evaluate(next(c for c in CASES if c.name == name))


def _marks(case: PublishedCase) -> list[pytest.MarkDecorator]:
    return [pytest.mark.slow] if case.problem.startswith("hf:") else []


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name, marks=_marks(c)) for c in CASES])
def test_each_published_ratio_stays_where_it_was_pinned(case: PublishedCase) -> None:
    ratio = _evaluated(case.name).ratio
    assert ratio == pytest.approx(RECORDED[case.name], rel=PIN_TOLERANCE), (
        f"{case.name}: ratio {ratio:.3f}, pinned {RECORDED[case.name]}: "
        "re-pin its recorded_ratio, saying why it moved"
    )
    if case.miss:
        assert abs(ratio - 1) > WITHIN, f"{case.name} is now within ±30% ({ratio:.2f}): drop its miss text"
    else:
        assert abs(ratio - 1) <= WITHIN, f"{case.name}: {ratio:.2f} is outside ±30% and has no explanation"


def test_the_cases_are_cited_pinned_and_reproducible() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names)) and set(RECORDED) == set(names)
    assert len([c for c in CASES if not c.miss]) >= 3  # issue 21: at least three within ±30%
    for case in CASES:
        assert case.citation.startswith("https://") and case.where and case.printed and case.date
        assert case.published > 0 and case.batch_size > 0
    gpt2 = next(c for c in CASES if c.name == "gpt2-124m-a100-40gb-bf16")
    assert gpt2.published == pytest.approx(115_000 / 1024)  # tokens/s per GPU / tokens per sample


def test_a_case_s_command_prints_the_estimate_the_case_records(run_cli) -> None:  # type: ignore[no-untyped-def]
    case = next(c for c in CASES if c.name == "resnet50-v100-16gb-fp32")
    args = shlex.split(case.command())
    assert args[:2] == ["flowrate", "estimate"]
    out = run_cli(*args[1:], "--json")
    assert out.code == 0, out.stderr
    report = out.json()
    assert report["configuration"]["batch_size"] == case.batch_size
    assert report["configuration"]["precision"] == case.precision
    assert report["estimate"]["samples_per_sec"] == pytest.approx(_evaluated(case.name).estimated, rel=1e-9)


def test_the_published_mfu_uses_the_datasheet_peak_of_the_case_s_precision() -> None:
    case = next(c for c in CASES if c.name == "resnet50-v100-16gb-fp32")
    row = _evaluated(case.name)
    assert row.peak_flops == 15.7e12  # V100 SXM2 fp32, the peak table's figure
    assert row.published_mfu == pytest.approx(367.0 * row.model_flops_per_sample / 15.7e12)
    assert row.estimated_mfu / row.published_mfu == pytest.approx(row.ratio)
