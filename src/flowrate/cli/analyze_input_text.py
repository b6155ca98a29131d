"""`flowrate analyze-input` as text: the plan, each configuration as it is timed, the table, and
the recommendation.

Pure: an InputAnalysis (or its parts) in, lines and rows out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowrate.data.make import problem_label
from flowrate.units import counted

if TYPE_CHECKING:
    from flowrate.harness.analyze_input import InputAnalysis, PipelinePoint
    from flowrate.harness.input_advice import InputSetup

HEADER = ["workers", "prefetch", "pipeline samples/s", "predicted input-bound", ""]
RIGHT_ALIGNED = (0, 1, 2, 3)


def measuring_line(setup: InputSetup) -> str:
    config = setup.config
    return (
        f"measuring {problem_label(setup.problem)}'s rate with synthetic data ({config.settled_mode}, "
        f"{config.precision.value}, batch {config.batch_size or setup.problem.default_batch_size})"
    )


def plan_line(rate: float, source: str, tried: int, seconds_each: float) -> str:
    return (
        f"model: {rate:.4g} samples/s ({source}); timing the loader alone at "
        f"{counted(tried, 'configuration')}, {seconds_each:g} s each"
    )


def title(analysis: InputAnalysis, data_dir: str) -> str:
    return f"input pipeline of {data_dir} against {analysis.consumption_samples_per_sec:.4g} samples/s"


def point_line(point: PipelinePoint) -> str:
    prefetch = f", prefetch {point.prefetch}" if point.prefetch is not None else ""
    return (
        f"{point.workers} worker(s){prefetch}: {point.samples_per_sec:.4g} samples/s "
        f"({point.batches} batches in {point.seconds:.2f} s)"
    )


def analysis_rows(analysis: InputAnalysis) -> list[list[str]]:
    """One row per configuration: workers, prefetch, pipeline rate, predicted share, a mark."""
    rows = []
    for p in analysis.points:
        mark = (
            "recommended"
            if p is analysis.recommended
            else ("keeps up" if p.predicted_share < analysis.target_share else "")
        )
        rows.append(
            [
                str(p.workers),
                "—" if p.prefetch is None else str(p.prefetch),
                f"{p.samples_per_sec:.4g}",
                f"{p.predicted_share:.1%}",
                mark,
            ]
        )
    return rows


def recommendation(analysis: InputAnalysis) -> str:
    """The verdict in one line: the smallest configuration that keeps up, or the shortfall."""
    chosen = analysis.recommended
    model = f"{analysis.consumption_samples_per_sec:.4g}"
    if chosen is not None:
        prefetch = f" --prefetch {chosen.prefetch}" if chosen.prefetch is not None else ""
        return (
            f"recommended: --loader-workers {chosen.workers}{prefetch}: the pipeline delivers "
            f"{chosen.samples_per_sec:.4g} samples/s, the model consumes {model}; predicted input-bound "
            f"share {chosen.predicted_share:.1%} (under {analysis.target_share:.0%})"
        )
    best = analysis.best
    prefetch = f", prefetch {best.prefetch}" if best.prefetch is not None else ""
    return (
        f"no configuration here keeps the input-bound share under {analysis.target_share:.0%}: the "
        f"pipeline delivers at most {best.samples_per_sec:.4g} samples/s "
        f"({best.workers} worker(s){prefetch}), "
        f"the model consumes {model}: {analysis.shortfall or 0:.2f}x short (predicted share "
        f"{best.predicted_share:.1%}); use more cores or shards, or store the data closer to what the "
        "model takes"
    )


def cpu_note(analysis: InputAnalysis, data_dir: str, on_cpu: bool) -> str | None:
    """On a CPU the workers compete with the model for the cores, which the prediction leaves out:
    how to confirm the recommendation, or None."""
    chosen = analysis.recommended
    if not on_cpu or chosen is None or not chosen.workers:
        return None
    return (
        "on a CPU device the loader workers share the cores with the model, which this prediction "
        f"leaves out: confirm with `flowrate run --data {data_dir} --loader-workers "
        f"{chosen.workers}` and the same options"
    )
