"""`--repeat N`: the same benchmark N times, each in a fresh process, combined pyperf-style.

One process can carry state from run to run (allocator caches, autotuning choices, a warm or
cold page cache, CPU frequency). Spawning a new interpreter per run (never fork: CUDA does not
survive it) makes each run independent, so the spread across runs is the honest uncertainty of a
figure. Runs execute one after another, never concurrently: they would compete for the hardware.

Combining: each run contributes its median interval rate; the across-run mean, standard
deviation, CV and Student-t 95% confidence interval are computed over those medians. Runs
"disagree" when the across-run CV reaches DISAGREE_CV or the slowest and fastest medians differ
by DISAGREE_RANGE of their median.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from flowrate.config import RunConfig
from flowrate.errors import FlowrateError
from flowrate.measure.stats import summarize
from flowrate.problems.registry import is_user_problem
from flowrate.results.schema import Result

DISAGREE_CV = 0.05
DISAGREE_RANGE = 0.10


def run_repeated(
    config: RunConfig,
    repeats: int,
    *,
    argv: list[str] | None = None,
    tensorboard: str | None = None,
    on_run: Callable[[int, Result], None] | None = None,
) -> Result:
    """Run ``config`` ``repeats`` times, each in a freshly spawned process, and combine the results.

    With ``tensorboard``, run i writes its event files to the subfolder ``run-i``.
    """
    if repeats < 1:
        raise FlowrateError(f"--repeat must be 1 or more, got {repeats}")
    if config.problem.startswith("python:"):
        raise FlowrateError(
            "--repeat runs each benchmark in a new process, which cannot receive a Problem object: "
            "give a zoo name or PATH.py:FACTORY"
        )
    if is_user_problem(config.problem):
        config = config.replace(problem=_absolute(config.problem))  # the child may start elsewhere
    context = multiprocessing.get_context("spawn")
    results = []
    for index in range(repeats):
        # a pool of one worker per run: every run gets an interpreter of its own
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            logdir = f"{tensorboard}/run-{index + 1}" if tensorboard else None
            outcome, text = pool.submit(_run_in_child, config.to_dict(), argv, logdir).result()
        if outcome == "error":
            raise FlowrateError(f"run {index + 1} of {repeats} failed: {text}")
        result = Result.from_json(text)
        results.append(result)
        if on_run is not None:
            on_run(index, result)
    return combine(results)


def _run_in_child(config: dict[str, Any], argv: list[str] | None, logdir: str | None) -> tuple[str, str]:
    from flowrate.runner import run_config

    try:
        return "ok", run_config(RunConfig.from_dict(config), argv=argv, tensorboard=logdir).to_json()
    except FlowrateError as error:  # crosses the process boundary as text: always picklable
        return "error", str(error)


def _absolute(spec: str) -> str:
    from pathlib import Path

    path, _, factory = spec.rpartition(":")
    return f"{Path(path).resolve()}:{factory}"


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
    section = {
        "runs": [_run_entry(r) for r in results],
        "n": len(results),
        "representative_run_id": representative.run_id,
        "median_samples_per_sec": across.median,
        "mean_samples_per_sec": across.mean,
        "stdev_samples_per_sec": across.stdev,
        "cv": across.cv,
        "ci95_low_samples_per_sec": across.ci95_low,
        "ci95_high_samples_per_sec": across.ci95_high,
        "range_fraction": spread,
        "disagree": disagree,
    }
    warnings = list(representative.warnings)
    if disagree:
        warnings.append(
            f"the {len(results)} runs disagree: per-run medians span "
            f"{min(medians):.4g}–{max(medians):.4g} samples/s (CV {across.cv:.1%}); something varies "
            "between processes (clocks, other load, thermal state): pin clocks, close other work, "
            "or raise --repeat"
        )
    return dataclasses.replace(representative, repeat=section, warnings=warnings)


def _run_entry(result: Result) -> dict[str, Any]:
    s = result.summary
    return {
        "run_id": result.run_id,
        "process_id": result.environment.get("process_id"),
        "median_samples_per_sec": s.median_samples_per_sec,
        "samples_per_sec": s.samples_per_sec,
        "cv": s.cv,
        "intervals": s.intervals,
        "timed_duration_s": s.timed_duration_s,
        "mfu": result.flops.get("mfu"),
        "final_loss": s.final_loss,
    }
