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
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from flowrate.config import RunConfig
from flowrate.errors import FlowrateError, OutOfMemory
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
    config = portable(config)
    results = []
    for index in range(repeats):
        logdir = f"{tensorboard}/run-{index + 1}" if tensorboard else None
        outcome = run_in_fresh_process(config, argv=argv, tensorboard=logdir)
        if outcome.result is None:
            raise FlowrateError(f"run {index + 1} of {repeats} failed: {outcome.message}")
        results.append(outcome.result)
        if on_run is not None:
            on_run(index, outcome.result)
    return combine(results)


# How a run in a fresh process can fail: OutOfMemory, another FlowrateError, or the process died.
OOM = "oom"
ERROR = "error"
CRASHED = "crashed"


@dataclass(frozen=True)
class ChildOutcome:
    """How a run in a fresh process ended: its Result, or the kind of failure and its message.

    The kind lets a caller tell an expected outcome (a sweep's batch that does not fit) from a
    real failure without parsing text. The child's wall-clock times (time.time()) at its start
    and end split a run's overhead into process start-up and work inside the process.
    """

    result: Result | None
    failure: str | None = None  # None when the run succeeded; else OOM, ERROR or CRASHED
    message: str = ""
    child_started: float | None = None
    child_finished: float | None = None


def portable(config: RunConfig) -> RunConfig:
    """``config`` as a new process can run it: a user problem's path made absolute."""
    if config.problem.startswith("python:"):
        raise FlowrateError(
            "each run happens in a new process, which cannot receive a Problem object: "
            "give a zoo name or PATH.py:FACTORY"
        )
    if is_user_problem(config.problem):
        return config.replace(problem=_absolute(config.problem))  # the child may start elsewhere
    return config


class ChildCrash(RuntimeError):
    """An unexpected exception in a run's process (a bug): it carries the child's traceback."""


def run_in_fresh_process(
    config: RunConfig, *, argv: list[str] | None = None, tensorboard: str | None = None
) -> ChildOutcome:
    """Run ``config`` in a newly spawned interpreter and wait for it (used by --repeat and sweeps).

    Never fork: CUDA does not survive it. A FlowrateError in the child comes back as a failure
    of kind OOM or ERROR; a child that dies before reporting (killed, out of host memory, a
    crash in native code) as CRASHED. Any other exception is a bug: ChildCrash, with the child's
    traceback. The child leaves with os._exit once its answer is sent, skipping the interpreter's
    teardown of torch (about 0.7 s per run on a CPU, paid by every sweep point); it has nothing
    left to flush, and this process still waits for it to be gone before going on. An interrupt
    here ends the child too.
    """
    config = portable(config)
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(
        target=_child_main, args=(sender, config.to_dict(), argv, tensorboard), name="flowrate-run"
    )
    process.start()
    sender.close()  # the child holds the only writer now: its death reads as end of file here
    try:
        try:
            kind, text, started, finished = receiver.recv()
        except EOFError:
            process.join()
            return ChildOutcome(
                None,
                CRASHED,
                f"its process died before reporting (exit code {process.exitcode}: killed, out of "
                "host memory, or a crash)",
            )
        process.join()
    finally:
        receiver.close()
        if process.is_alive():  # interrupted while waiting: no orphan keeps running
            process.kill()
            process.join()
    if kind == "ok":
        return ChildOutcome(Result.from_json(text), None, "", started, finished)
    if kind == _BUG:
        raise ChildCrash(f"the run's process failed:\n{text}")
    return ChildOutcome(None, kind, text, started, finished)


_BUG = "bug"


def _child_main(
    sender: Connection, config: dict[str, Any], argv: list[str] | None, logdir: str | None
) -> None:
    """The child's whole life: run, send the answer, leave at once (see run_in_fresh_process)."""
    code = 1
    try:
        sender.send(_run_in_child(config, argv, logdir))
        code = 0
    finally:  # an interrupt leaves too, quietly: the parent says what happened
        sender.close()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _run_in_child(
    config: dict[str, Any], argv: list[str] | None, logdir: str | None
) -> tuple[str, str, float, float]:
    started = time.time()
    from flowrate.harness.run import run_config

    try:
        text = run_config(RunConfig.from_dict(config), argv=argv, tensorboard=logdir).to_json()
        return "ok", text, started, time.time()
    except OutOfMemory as error:  # crosses the process boundary as text: always picklable
        return OOM, str(error), started, time.time()
    except FlowrateError as error:
        return ERROR, str(error), started, time.time()
    except Exception:
        return _BUG, traceback.format_exc(), started, time.time()


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
