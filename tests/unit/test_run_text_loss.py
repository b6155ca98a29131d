"""The run's summary shows a final loss for a training run only: an inference run has no training
loss to report."""

from __future__ import annotations

import dataclasses

import pytest

from factories import make_result
from flowrate.cli.run_text import summary_rows


@pytest.mark.parametrize(("mode", "shown"), [("train", True), ("infer", False)])
def test_final_loss_is_a_row_of_training_runs_only(mode: str, shown: bool) -> None:
    result = make_result(mode=mode)
    result = dataclasses.replace(result, summary=dataclasses.replace(result.summary, final_loss=2.5))
    rows = dict(summary_rows(result))
    assert ("final loss" in rows) is shown
    if shown:
        assert rows["final loss"] == "2.5000"
