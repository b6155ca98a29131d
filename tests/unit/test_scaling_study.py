"""flowrate.campaigns.scaling.plan.scaling_study: the plan reported first, each size as it ends,
every run recorded with the study's tags (or none with record=False), and the efficiencies.

The torchrun launch of a size is replaced by hand-made results (its own end-to-end test is
tests/integration/test_data_parallel.py's scaling test)."""

from __future__ import annotations

from pathlib import Path

import pytest

import factories
from flowrate.campaigns.scaling import run as scaling_run
from flowrate.campaigns.scaling.plan import ScalingPlan, scaling_study
from flowrate.config import RunConfig
from flowrate.results.schema import Result
from flowrate.results.store import Store

RATES = {1: 100.0, 2: 150.0}  # samples/s summed over the ranks of each size


class Heard:
    def __init__(self) -> None:
        self.events: list[str] = []

    def planned(self, plan: ScalingPlan) -> None:
        self.events.append(f"plan {plan.label} {plan.sizes} threads={plan.config.threads}")

    def size_done(self, processes: int, result: Result) -> None:
        self.events.append(f"{processes}: {result.run_id}")


@pytest.fixture(autouse=True)
def launched(monkeypatch: pytest.MonkeyPatch) -> None:
    def run_size(config: RunConfig, processes: int, workdir: Path) -> Result:
        return factories.make_result(RATES[processes], mode="infer", run_id=f"n{processes}")

    monkeypatch.setattr(scaling_run, "run_size", run_size)


CONFIG = RunConfig(problem="fc_mnist", mode="infer", device="cpu", threads=1, steps=10)


def test_the_plan_then_each_size_is_heard_and_recorded_with_the_studys_tags(results_store: Path) -> None:
    heard = Heard()
    plan, report = scaling_study(
        CONFIG,
        [1, 2],
        name="tiny",
        store=str(results_store),
        tags=("t",),
        on_plan=heard.planned,
        on_size=heard.size_done,
    )
    assert heard.events == ["plan tiny [1, 2] threads=1", "1: n1", "2: n2"]
    assert plan.label == report.name == "tiny"
    assert [(p.processes, p.efficiency) for p in report.points] == [(1, 1.0), (2, 0.75)]
    with Store(results_store) as store:
        tags = {run.run_id: sorted(run.tags) for run in store.runs()}
    assert tags == {"n1": ["nproc:1", "scaling:tiny", "t"], "n2": ["nproc:2", "scaling:tiny", "t"]}


def test_record_false_opens_no_store(results_store: Path) -> None:
    _, report = scaling_study(CONFIG, [1, 2], store=str(results_store), record=False)
    assert [p.run_id for p in report.points] == ["n1", "n2"]
    assert not results_store.exists()
