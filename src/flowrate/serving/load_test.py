"""A serve-bench load test from its resolved plan to how it ends: one load (or a rate search) as
one Result, or a sweep of loads as one Result a point, each with the verdict that sets the
command's exit code — interrupted (the measured part recorded partial) or failed, and why."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flowrate.errors import RunFailed
from flowrate.results.schema import Result
from flowrate.results.serving import Serving
from flowrate.results.serving_curve import CurvePoint
from flowrate.serving import plan as plan_module
from flowrate.serving import sweep_run
from flowrate.serving.client import SHED
from flowrate.serving.plan import Plan
from flowrate.serving.search import INTERRUPTED


@dataclass(frozen=True)
class LoadTest:
    """One load (or rate search) measured: its run, its serving section and how it ends."""

    result: Result
    section: Serving
    interrupted: bool  # Ctrl-C: the run is recorded partial (exit 130)
    failure: str | None  # why the command fails though the run is recorded (exit 1), or None


@dataclass(frozen=True)
class LoadSweep:
    """A sweep of loads measured: one run a point, the curve, why it stopped and how it ends."""

    results: tuple[Result, ...]
    curve: tuple[CurvePoint, ...]
    stopped: str
    interrupted: bool  # Ctrl-C: the points measured are recorded, the cut one partial (exit 130)
    failure: str | None  # the points that failed as one load fails, '; '-joined (exit 1), or None


def run_load_test(
    plan: Plan, max_error_rate: float, argv: list[str], say: Callable[[str], None]
) -> LoadTest | LoadSweep:
    """Run the plan: its sweep of loads when it has one, else its load or rate search. ``say``
    hears each progress line. A sweep that ends before its first point measured nothing to
    record: Ctrl-C there is re-raised, a spent --budget is RunFailed."""
    if plan.loads is not None:
        return _sweep(plan, max_error_rate, argv, say)
    result = plan_module.execute(plan, argv, say)
    section = result.serving or Serving()
    return LoadTest(result, section, bool(section.partial), load_failure(section, max_error_rate))


def load_failure(section: Serving, max_error_rate: float) -> str | None:
    """A rate search fails when no rate met the SLO (its points count failed requests as missing
    it); one load fails as failure() says."""
    search = section.search
    if search is None:
        return failure(section, max_error_rate)
    if search.max_rate is None:
        return f"no rate met the SLO ({search.stopped}); every point is recorded"
    return None


def _sweep(plan: Plan, max_error_rate: float, argv: list[str], say: Callable[[str], None]) -> LoadSweep:
    done = sweep_run.execute_sweep(plan, argv, say)
    if not done.results:
        if done.stopped == INTERRUPTED:
            raise KeyboardInterrupt
        raise RunFailed(f"--budget was spent before the first load ({done.stopped}); no load was sent")
    failures = [
        f"{point.load.label}: {why}"
        for point, result in zip(done.curve, done.results, strict=True)
        if not point.partial and (why := failure(result.serving or Serving(), max_error_rate))
    ]
    return LoadSweep(
        tuple(done.results),
        tuple(done.curve),
        done.stopped,
        done.stopped == INTERRUPTED,
        "; ".join(failures) or None,
    )


def failure(section: Serving, max_error_rate: float) -> str | None:
    """Why a recorded load fails (exit 1), or None: no request completed, or more failed than
    --max-error-rate allows. A load the server shed (HTTP 429/503) is said so."""
    errors = section.errors or {}
    kinds = ", ".join(f"{k} x{v}" for k, v in errors.items())
    failed = sum(errors.values())
    shed = sum(v for k, v in errors.items() if k.startswith(SHED))
    if section.requests and failed == shed == section.requests:
        return (
            f"the server shed the load: all {failed} requests were answered HTTP 429/503 ({kinds}); "
            "lower --rate or --concurrency; the run is recorded"
        )
    if section.requests and section.figures().completed == 0:
        return f"no request completed ({kinds}); the run is recorded with its traces"
    error_rate = section.figures().error_rate or 0.0
    if error_rate > max_error_rate:
        return (
            f"{error_rate:.1%} of requests failed ({kinds}), above --max-error-rate "
            f"{max_error_rate:.1%}; the run is recorded"
        )
    return None
