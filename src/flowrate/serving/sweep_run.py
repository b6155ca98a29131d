"""Running a planned sweep of loads (serving.sweep) and recording each point as a run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flowrate.results.schema import Result
from flowrate.results.serving_curve import CurvePoint
from flowrate.serving import capacity, sweep
from flowrate.serving import plan as plan_module
from flowrate.serving.metrics import Slo
from flowrate.serving.plan import Plan
from flowrate.serving.result import serving_section
from flowrate.serving.search import INTERRUPTED


@dataclass(frozen=True)
class SweepResults:
    """A sweep's points, each a Result of its own, and its curve."""

    results: list[Result]
    curve: list[CurvePoint]
    stopped: str


def execute_sweep(plan: Plan, argv: list[str], say: Callable[[str], None]) -> SweepResults:
    """Run a sweep of loads (serving.sweep) and build one Result a point: each section holds its
    own load and the sweep's id, its place in it and why the sweep stopped."""
    import uuid

    import torch

    from flowrate.measure.env import collect_environment

    assert plan.loads is not None
    client = collect_environment(torch.device("cpu"), argv)
    slo = Slo(**plan.slo) if plan.slo else None
    if plan.calibrate:
        plan_module.calibrate(plan)
    keys = list(plan.slo or {})
    runner = capacity.Runner(
        plan.target,
        plan.prompts,
        plan.settings,
        len(plan.prompts),
        keys,
        plan.deadline_s,
        plan.tokenizer,
        plan.conversations,
    )
    done = sweep.run_sweep(runner, plan.loads, plan.budget_s, plan.started, say, plan.verdicts)
    sweep_id, results, curve = uuid.uuid4().hex[:12], [], []
    for number, point in enumerate(done.points):
        outcome = runner.outcomes[number]
        settings = {
            **plan.settings,
            "rate": point.load.rate,
            "concurrency": point.load.concurrency,
            "sweep": {
                "id": sweep_id,
                "point": number,
                "loads": [load.label for load in plan.loads],
                "stopped": done.stopped,
                "cut": point.cut,
                "verdict": point.verdict,
                "slo_latency_ms": point.latency_ms or None,
            },
        }
        section = serving_section(outcome.traces, slo, settings, point.cut == INTERRUPTED)
        results.append(plan_module.record(outcome.traces, section, client))
        curve.append(sweep.curve_point(point, section))
    return SweepResults(results, curve, done.stopped)
