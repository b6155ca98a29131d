"""`--repeat N`: the same benchmark N times, each in a fresh process, combined pyperf-style.

Each run is independent of the others (flowrate.campaigns.process.child says why a fresh process), so
the spread across runs is the honest uncertainty of a figure. Runs execute one after another,
never concurrently: they would compete for the hardware.

Combining: each run contributes its median interval rate; the across-run mean, standard
deviation, CV and Student-t 95% confidence interval are computed over those medians. Runs
"disagree" when the across-run CV reaches DISAGREE_CV or the slowest and fastest medians differ
by DISAGREE_RANGE of their median.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from flowrate.campaigns.process.child import portable, run_in_fresh_process
from flowrate.config import RunConfig
from flowrate.errors import FlowrateError, RunFailed
from flowrate.measure.stats import summarize
from flowrate.results.schema import Result
from flowrate.results.sections import Repeat, RepeatRun

DISAGREE_CV = 0.05
DISAGREE_RANGE = 0.10


class RepeatInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) during --repeat after some runs finished: ``partial`` combines those, so
    the caller can keep them before it exits as interrupted."""

    def __init__(self, partial: Result) -> None:
        super().__init__()
        self.partial = partial


def run_repeated(
    config: RunConfig,
    repeats: int,
    *,
    argv: list[str] | None = None,
    tensorboard: str | None = None,
    on_run: Callable[[int, Result], None] | None = None,
) -> Result:
    """Run ``config`` ``repeats`` times, each in a fresh process, and combine the results.

    With ``tensorboard``, run i writes its event files to the subfolder ``run-i``. Interrupted
    after a run finished, it raises RepeatInterrupted with the finished runs combined.
    """
    if repeats < 1:
        raise FlowrateError(f"--repeat must be 1 or more, got {repeats}")
    config = portable(config)
    results: list[Result] = []
    try:
        for index in range(repeats):
            logdir = f"{tensorboard}/run-{index + 1}" if tensorboard else None
            outcome = run_in_fresh_process(config, argv=argv, tensorboard=logdir)
            if outcome.result is None:
                raise RunFailed(f"run {index + 1} of {repeats} failed: {outcome.message}")
            results.append(outcome.result)
            if on_run is not None:
                on_run(index, outcome.result)
    except KeyboardInterrupt:
        if not results:
            raise
        partial = combine(results)
        note = (
            f"interrupted after {len(results)} of {repeats} runs: the figures combine the "
            f"{len(results)} that finished"
        )
        raise RepeatInterrupted(dataclasses.replace(partial, warnings=[*partial.warnings, note])) from None
    return combine(results)


def combine(results: list[Result]) -> Result:
    """The run with the median of the per-run medians, carrying the across-run statistics."""
    if not results:
        raise ValueError("combine() needs at least one result")
    medians = [r.summary.median_samples_per_sec for r in results]
    across = summarize(medians)
    spread = (max(medians) - min(medians)) / across.median if across.median else 0.0
    disagree = len(results) > 1 and (across.cv >= DISAGREE_CV or spread >= DISAGREE_RANGE)
    order = sorted(range(len(results)), key=lambda i: medians[i])
    representative = results[order[(len(order) - 1) // 2]]
    section = Repeat(
        runs=[_run_entry(r) for r in results],
        n=len(results),
        representative_run_id=representative.run_id,
        median_samples_per_sec=across.median,
        mean_samples_per_sec=across.mean,
        stdev_samples_per_sec=across.stdev if len(results) > 1 else None,  # one run: unknown
        cv=across.cv if len(results) > 1 else None,
        ci95_low_samples_per_sec=across.ci95_low,
        ci95_high_samples_per_sec=across.ci95_high,
        range_fraction=spread,
        disagree=disagree,
    )
    warnings = list(representative.warnings)
    if disagree:
        warnings.append(
            f"the {len(results)} runs disagree: per-run medians span "
            f"{min(medians):.4g}–{max(medians):.4g} samples/s (CV {across.cv:.1%}); something varies "
            "between processes (clocks, other load, thermal state): pin clocks, close other work, "
            "or raise --repeat"
        )
    return dataclasses.replace(representative, repeat=section, warnings=warnings)


def _run_entry(result: Result) -> RepeatRun:
    s = result.summary
    return RepeatRun(
        run_id=result.run_id,
        process_id=result.environment.process_id,
        median_samples_per_sec=s.median_samples_per_sec,
        samples_per_sec=s.samples_per_sec,
        cv=s.cv,
        intervals=s.intervals,
        timed_duration_s=s.timed_duration_s,
        mfu=result.flops.mfu,
        final_loss=s.final_loss,
    )
