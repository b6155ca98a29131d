"""Predicted against measured over time, per machine: does the cost model drift?

Every run records the cost model's prediction for its configuration on its device
(``Result.estimate``); a run recorded before that, or whose estimate failed, can still be priced
afterwards with the calibration of the machine it ran on, where one exists whose fingerprint
(host, device, CPU model, threads: flowrate.results.noise.machine) matches the run's. Each run
gives one point, predicted ÷ measured samples/s, saying where its prediction came from; points are
grouped by machine and ordered by time, so a ratio that walks away shows (a new torch, a driver,
a cost-model change: each point also carries the cost model's version).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from flowrate.results.noise import machine
from flowrate.results.schema import Result
from flowrate.results.sections import Estimate
from flowrate.results.store import StoredRun

RECORDED = "recorded"  # the prediction the run recorded as it ran
NO_ESTIMATE = "no estimate recorded (an older run, or a check)"


@dataclass(frozen=True)
class DriftPoint:
    run_id: str
    created_at: str
    configuration: str  # problem/size mode precision batch, in words
    predicted: float | None  # samples/s
    measured: float | None
    source: str  # RECORDED, "recomputed with the calibration of … (date)", or why there is none
    cost_model: str | None

    @property
    def ratio(self) -> float | None:
        """Predicted ÷ measured, None without both."""
        return self.predicted / self.measured if self.predicted and self.measured else None


@dataclass(frozen=True)
class MachineDrift:
    machine: dict[str, Any]
    points: list[DriftPoint]  # oldest first

    @property
    def label(self) -> str:
        m = self.machine
        threads = f", {m['num_threads']} threads" if m.get("num_threads") is not None else ""
        host = f"{m['hostname']}: " if m.get("hostname") else ""
        return f"{host}{m.get('device_name') or '?'} ({m.get('cpu_model') or '?'}{threads})"

    @property
    def ratios(self) -> list[float]:
        return [p.ratio for p in self.points if p.ratio is not None]

    def summary(self) -> str:
        ratios = self.ratios
        if not ratios:
            return f"{len(self.points)} run(s), none with a prediction"
        within = sum(abs(r - 1) <= 0.3 for r in ratios)
        return (
            f"{len(ratios)} of {len(self.points)} run(s) with a prediction: median ratio "
            f"{statistics.median(ratios):.2f}, first {ratios[0]:.2f}, last {ratios[-1]:.2f}, "
            f"{within} within ±30%"
        )


# prices a run that recorded no prediction: (samples/s or None, where it came from or why there is
# none, the cost model's version when it priced one); flowrate.estimate.reprice makes the usual one
Pricer = Callable[[Result], tuple[float | None, str, str | None]]


def drift(runs: Sequence[StoredRun], recompute: Pricer | None = None) -> list[MachineDrift]:
    """The runs' ratios grouped by machine (machines in order of their first run), oldest first.

    ``recompute`` prices a run that recorded no prediction (flowrate.estimate.reprice's
    ``recompute_with_calibration`` is the usual one); without it such a run has none."""
    groups: dict[str, MachineDrift] = {}
    for run in sorted(runs, key=lambda r: r.created_at or ""):
        result = run.result
        key = repr(sorted(machine(result).items()))
        group = groups.setdefault(key, MachineDrift(machine(result), []))
        group.points.append(_point(run, result, recompute))
    return list(groups.values())


def _point(run: StoredRun, result: Result, recompute: Pricer | None) -> DriftPoint:
    estimate = result.estimate or Estimate()
    predicted = estimate.samples_per_sec
    source = RECORDED if predicted else (estimate.reason or NO_ESTIMATE)
    cost_model = estimate.cost_model
    # only a run that recorded nothing (an older one) is priced afterwards: one that recorded a
    # reason (data-parallel, …) or a `flowrate check` (its throughput is not a benchmark) is not
    if result.estimate is None and result.fidelity is None and recompute is not None:
        priced, why, model = recompute(result)
        if priced:
            predicted, source, cost_model = priced, why, model
        else:
            source = f"{source}; {why}"
    c, p = result.config, result.problem
    return DriftPoint(
        run_id=run.run_id,
        created_at=run.created_at,
        configuration=f"{p.name}/{p.size} {c.mode} {c.precision} batch {result.batch_size}",
        predicted=predicted,
        measured=result.summary.samples_per_sec,
        source=source,
        cost_model=cost_model,
    )
