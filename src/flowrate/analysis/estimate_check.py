"""`flowrate estimate --check` over recorded runs: each run's prediction beside its measurement,
and, for a profiled run, the cost model's time per operator class beside the profiler's.

A run's prediction is the one it recorded as it ran (``Result.estimate``); predicted ÷ measured
samples/s is its ratio, and a run without one says why. A profiled run (--profile DIR) also
carries both sides per operator class in its profile section (flowrate.results.profile.OpClassTime):
the predicted time is the cost model's own ops summed by class (its framework terms the
"framework" class), the measured time the profile's operator table summed by the same classes
(flowrate.estimate.ops.op_class), over the same profiled steps, so a wrong estimate names the
operators it mispriced. Records in, typed checks out; flowrate.cli.estimate_text and
flowrate.cli.op_check_text render them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flowrate.analysis.estimate_drift import NO_ESTIMATE
from flowrate.results.profile import Profile
from flowrate.results.sections import Estimate
from flowrate.results.store import StoredRun

# A class whose predicted ÷ measured is outside 1 ± this is mispriced (the run-level check's ±30%)
MISPRICED = 0.3


@dataclass(frozen=True)
class RunCheck:
    """One recorded run: its configuration in words, predicted and measured samples/s, and why it
    has no ratio where it has none."""

    run_id: str
    problem: str  # name/size
    mode: str
    precision: str
    batch_size: str
    device: str  # the estimate's device, else the run's
    predicted: float | None
    measured: float | None
    reason: str | None  # why there is no ratio; None where there is one

    @property
    def ratio(self) -> float | None:
        """predicted ÷ measured; None without both."""
        return self.predicted / self.measured if self.predicted and self.measured else None


def run_check(run: StoredRun) -> RunCheck:
    """A run's recorded prediction beside what it measured."""
    result = run.result
    estimate = result.estimate or Estimate()
    predicted, measured = estimate.samples_per_sec, result.summary.samples_per_sec
    reason = None if predicted and measured else (estimate.reason or NO_ESTIMATE)
    c, p = result.config, result.problem
    return RunCheck(
        run_id=run.run_id,
        problem=f"{p.name}/{p.size}",
        mode=str(c.mode),
        precision=str(c.precision),
        batch_size=str(result.batch_size),
        device=str(estimate.device or result.environment.device_name or "?"),
        predicted=predicted,
        measured=measured,
        reason=reason,
    )


@dataclass(frozen=True)
class ClassCheck:
    """One operator class of one profiled run: per profiled step, predicted beside measured."""

    op_class: str
    calls: float  # profiled events of the class per step
    predicted_s: float
    measured_s: float

    @property
    def ratio(self) -> float | None:
        """predicted ÷ measured; None where nothing of the class was measured."""
        return self.predicted_s / self.measured_s if self.measured_s > 0 else None

    @property
    def mispriced(self) -> bool:
        ratio = self.ratio
        return ratio is None or abs(ratio - 1) > MISPRICED


@dataclass(frozen=True)
class OperatorCheck:
    """A profiled run's classes, or why it has none to check."""

    run_id: str
    classes: list[ClassCheck]
    reason: str | None = None  # why there is no per-operator view

    @property
    def mispriced(self) -> list[ClassCheck]:
        """The classes outside ±MISPRICED, the most time mispredicted first."""
        wrong = [c for c in self.classes if c.mispriced]
        return sorted(wrong, key=lambda c: (-abs(c.predicted_s - c.measured_s), c.op_class))


def operator_check(run_id: str, profile: Profile) -> OperatorCheck:
    """The per-operator view of one run's profile section."""
    if not profile.classes:
        return OperatorCheck(run_id, [], "profiled before flowrate kept the time per class: profile it again")
    if profile.cost_model_reason or any(c.predicted_s is None for c in profile.classes):
        return OperatorCheck(run_id, [], profile.cost_model_reason or "the cost model did not price it")
    steps = profile.steps or 1
    classes = [
        ClassCheck(c.op_class, c.calls / steps, (c.predicted_s or 0.0) / steps, c.measured_s / steps)
        for c in profile.classes
    ]
    return OperatorCheck(run_id, classes)


def operator_checks(runs: Sequence[StoredRun]) -> list[OperatorCheck]:
    """The per-operator view of each selected run that was profiled, in order."""
    return [operator_check(run.run_id, run.result.profile) for run in runs if run.result.profile is not None]
