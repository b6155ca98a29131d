"""flowrate.campaigns.recorded_run: `flowrate run`'s steps after its flags, in order: the run with
its progress, a stored survey's MFU, the result kept, and what is returned. A real in-process run
of a tiny GEMM, seen by a listener that writes down what it is handed."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from factories import make_result
from flowrate.campaigns.recorded_run import run_and_record
from flowrate.config import RunConfig
from flowrate.harness.survey_bands import make_figure
from flowrate.results.configs import config_from
from flowrate.results.schema import IntervalRecord, Result
from flowrate.results.sections import Kind, ProblemInfo, Survey
from flowrate.results.store import Store

CONFIG = RunConfig(
    problem="gemm",
    problem_options={"m": 8, "n": 8, "k": 8},
    device="cpu",
    precision="fp32",
    threads=1,
    steps=3,
    sample_every=1,
    preheat_steps=1,
)
MATMUL_MAX = 4e12  # the survey's fp32 matmul maximum, FLOP/s


class Seen:
    """A RunListener that writes down each thing it is handed, in order."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.kept: list[Result] = []

    @contextlib.contextmanager
    def progress(self, config: RunConfig) -> Iterator[Callable[[IntervalRecord], None]]:
        self.events.append(f"progress {config.problem}")
        yield lambda record: self.events.append(f"interval of {record.steps} step")
        self.events.append("progress ends")

    def repeating(self, repeat: int) -> None:
        self.events.append(f"{repeat} runs")

    def repeat_run(self, index: int, repeat: int, result: Result) -> None:
        self.events.append(f"run {index + 1} of {repeat}")

    def keep(self, result: Result, interrupted: bool) -> None:
        self.events.append("keep, interrupted" if interrupted else "keep")
        self.kept.append(result)


def _survey_of(environment: Result) -> Result:
    figure = make_figure("matmul fp32", MATMUL_MAX, "FLOP/s")
    return dataclasses.replace(
        make_result(1.0),
        environment=environment.environment,
        kind=Kind.SURVEY,
        survey=Survey(figures=[figure]),
        problem=ProblemInfo(name="survey", size="quick"),
        run_id="5urvey000001",
        config=config_from(Kind.SURVEY, {"problem": "survey"}),
    )


def test_the_run_is_kept_after_its_progress_and_returned_as_kept() -> None:
    seen = Seen()
    done = run_and_record(CONFIG, None, seen)
    assert seen.events == [
        "progress gemm",
        *["interval of 1 step"] * 3,
        "progress ends",
        "keep",
    ]
    assert seen.kept == [done.result] and done.mlflow_run is None
    assert done.result.flops.measured_peak_flops is None  # no store: no survey to measure against


def test_a_stored_survey_of_this_machine_gives_the_kept_result_its_mfu(tmp_path: Path) -> None:
    first = run_and_record(CONFIG, None, Seen()).result
    with Store(tmp_path / "s.db") as store:
        store.add(_survey_of(first))
    seen = Seen()
    done = run_and_record(CONFIG, None, seen, store=Store(tmp_path / "s.db"))
    flops = seen.kept[0].flops
    assert seen.kept == [done.result]
    assert (flops.measured_peak_flops, flops.measured_peak_source) == (MATMUL_MAX, "survey 5urvey000001")
    assert flops.mfu_of_measured_peak == pytest.approx(flops.model_flops_per_sec / MATMUL_MAX, rel=1e-12)
