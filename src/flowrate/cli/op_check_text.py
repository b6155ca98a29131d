"""`flowrate estimate --check`'s per-operator view: for a profiled run (--profile DIR), the cost
model's time per operator class divided by the profiler's, so a wrong estimate names the
operators it mispriced.

Both sides come from the record's profile section (flowrate.results.profile.OpClassTime): the
predicted time is the cost model's own ops summed by class (its framework terms the "framework"
class), the measured time the profile's operator table summed by the same classes
(flowrate.estimate.ops.op_class), over the same profiled steps. Pure: data in, rows out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flowrate.units import seconds

if TYPE_CHECKING:
    from flowrate.results.profile import Profile
    from flowrate.results.store import StoredRun

OPERATOR_HEADER = ("class", "calls/step", "predicted/step", "measured/step", "ratio")
# A class whose predicted ÷ measured is outside 1 ± this is mispriced (the run-level check's ±30%)
MISPRICED = 0.3


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


def operator_checks(runs: list[StoredRun]) -> list[OperatorCheck]:
    """The per-operator view of each selected run that was profiled, in order."""
    return [operator_check(run.run_id, run.result.profile) for run in runs if run.result.profile is not None]


def check_table(check: OperatorCheck) -> tuple[str, list[list[str]], str]:
    """(title, rows, summary line) of one run's per-operator view; no rows where it has none."""
    title = f"predicted against measured per operator class: run {check.run_id[:8]}"
    if check.reason is not None:
        return title, [], f"no per-operator view: {check.reason}"
    rows = [
        [
            c.op_class,
            f"{c.calls:g}",
            seconds(c.predicted_s),
            seconds(c.measured_s),
            f"{c.ratio:.2f}" if c.ratio is not None else "—",
        ]
        for c in check.classes
    ]
    return title, rows, summary_line(check)


def summary_line(check: OperatorCheck) -> str:
    """Which classes the cost model mispriced (outside ±30%), the most time mispredicted first."""
    wrong = check.mispriced
    if not wrong:
        return f"every class within ±{MISPRICED:.0%} of its measured time"

    def said(c: ClassCheck) -> str:
        if c.ratio is None:
            return f"{c.op_class} (predicted {seconds(c.predicted_s)}, none measured)"
        times = f"predicted {seconds(c.predicted_s)}, measured {seconds(c.measured_s)}"
        return f"{c.op_class} ({c.ratio:.2f}x: {times})"

    return f"mispriced (outside ±{MISPRICED:.0%}), most time first: " + "; ".join(map(said, wrong))


def check_json(checks: list[OperatorCheck]) -> list[dict[str, Any]]:
    """The per-operator views as --json writes them: per profiled step, each class's ratio."""
    return [
        {
            "run": check.run_id,
            "reason": check.reason,
            "classes": [
                {
                    "op_class": c.op_class,
                    "calls_per_step": c.calls,
                    "predicted_s": c.predicted_s,
                    "measured_s": c.measured_s,
                    "ratio": c.ratio,
                    "mispriced": c.mispriced,
                }
                for c in check.classes
            ],
            "mispriced": [c.op_class for c in check.mispriced],
        }
        for check in checks
    ]
