"""`flowrate scaling` as text: the plan, each size as it ends, and the efficiency table.

Pure: a plan, a Result or a ScalingReport in, lines or rows out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowrate.cli.run_text import span
from flowrate.units import rate

if TYPE_CHECKING:
    from flowrate.campaigns.scaling.plan import ScalingPlan
    from flowrate.problems.base import Problem
    from flowrate.results.scaling_report import ScalingReport
    from flowrate.results.schema import Result

HEADER = ["processes", "samples/s (sum)", "per rank", "efficiency", "run"]
RIGHT_ALIGNED = (0, 1, 2, 3)


def title(plan: ScalingPlan, problem: Problem) -> str:
    return f"weak scaling {plan.label}: {problem.name}/{problem.size}"


def start_line(plan: ScalingPlan, problem: Problem) -> str:
    """What each size runs, at which process counts, for how long."""
    config = plan.config
    threads = f", {config.threads} thread(s) per rank" if config.threads else ""
    return (
        f"flowrate scaling {plan.label}: {problem.name}/{problem.size} {config.mode}, batch "
        f"{config.batch_size or problem.default_batch_size} per rank{threads}, at "
        f"{', '.join(map(str, plan.sizes))} processes; each times {span(config)}"
    )


def size_line(processes: int, result: Result) -> str:
    return f"{processes} process(es): {result.summary.samples_per_sec:.4g} samples/s (run {result.run_id})"


def rows(report: ScalingReport) -> list[list[str]]:
    """One row per size: processes, summed and per-rank samples/s, efficiency, run id."""
    return [
        [
            str(p.processes),
            rate(p.samples_per_sec),
            rate(p.samples_per_sec_per_rank),
            f"{p.efficiency:.1%}",
            p.run_id,
        ]
        for p in report.points
    ]


def communication_lines(report: ScalingReport) -> list[str]:
    """Each size above the baseline: the gradients' all-reduce at the measured busbw against the
    measured step overhead (flowrate.campaigns.scaling.comm)."""
    return [
        f"{c.processes} processes: predicted all-reduce overhead {c.predicted_s * 1e3:.3g} ms/step "
        f"({c.gradient_bytes / 1e6:.3g} MB at {c.busbw_bytes_per_sec / 1e9:.3g} GB/s busbw) "
        f"vs measured {c.measured_s * 1e3:.3g} ms/step"
        for c in report.communication
    ]
