"""`flowrate estimate --check`: the cost model's predictions set against recorded measurements.

For the selected runs: each run's recorded prediction beside what it measured, predicted ÷
measured over time per machine (a run that recorded no prediction priced afterwards with its
machine's calibration, flowrate.estimate.reprice), and the per-operator view of each profiled
run (flowrate.analysis.estimate_check).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flowrate.analysis.estimate_check import OperatorCheck, RunCheck, operator_checks, run_check
from flowrate.analysis.estimate_drift import MachineDrift, drift
from flowrate.estimate.reprice import recompute_with_calibration
from flowrate.results.store import StoredRun


@dataclass(frozen=True)
class EstimateCheck:
    """Predicted against measured: per run, per machine over time, per operator class."""

    runs: list[RunCheck]  # in the order selected
    machines: list[MachineDrift]
    operators: list[OperatorCheck]  # the profiled runs', in order


def check_estimates(runs: Sequence[StoredRun]) -> EstimateCheck:
    """The check of ``runs``: their predictions, the drift per machine and the profiled runs'
    per-operator views."""
    return EstimateCheck(
        runs=[run_check(run) for run in runs],
        machines=drift(runs, recompute_with_calibration()),
        operators=operator_checks(runs),
    )
