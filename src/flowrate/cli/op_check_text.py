"""`flowrate estimate --check`'s per-operator view, rendered: for a profiled run (--profile DIR),
the cost model's time per operator class beside the profiler's
(flowrate.analysis.estimate_check.OperatorCheck), so a wrong estimate names the operators it
mispriced. Pure: checks in, rows and lines out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flowrate.analysis.estimate_check import MISPRICED
from flowrate.units import seconds

if TYPE_CHECKING:
    from flowrate.analysis.estimate_check import ClassCheck, OperatorCheck

OPERATOR_HEADER = ("class", "calls/step", "predicted/step", "measured/step", "ratio")


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
