"""A sweep over loads in one command: --rate R1,R2,… (open loop) or --concurrency C1,C2,…
(closed loop). One point a load, in the order given, each sent whole by the rate search's
per-point runner (serving.capacity.Runner) and recorded as a run of its own, so each is a
configuration of its own by its load (results.identity). --budget bounds the sweep: no point
starts once it is spent, and the point running at its end is cut there. Ctrl-C stops the whole
sweep: the points measured are kept, the cut one recorded partial. With --slo each point gets the
rate search's verdict (serving.search.verdict): pass, fail or undecided."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flowrate.config.serve import ServeConfig
from flowrate.errors import ConfigError
from flowrate.results import serving_curve
from flowrate.results.serving import Serving
from flowrate.results.serving_curve import CurvePoint, Load
from flowrate.serving.capacity import FINISH_S, Runner
from flowrate.serving.search import BUDGET, INTERRUPTED, Measured, verdict

DONE = "every load"  # the sweep's stop reason when no point was cut


def loads_from(rates: tuple[float, ...] | None, concurrencies: tuple[int, ...] | None) -> list[Load] | None:
    """The sweep's loads (None for one load): each rate finite and above 0, each concurrency at
    least 1, none twice, all checked before the first request."""
    if rates is not None and len(rates) > 1:
        for rate in rates:
            if not 0 < rate < math.inf:
                raise ConfigError("--rate", f"a sweep's rates are finite numbers above 0, not {rate:g}")
        _unique("--rate", rates)
        return [Load(rate=rate) for rate in rates]
    if concurrencies is not None and len(concurrencies) > 1:
        if min(concurrencies) < 1:
            raise ConfigError("--concurrency", "a sweep's concurrencies are integers from 1")
        _unique("--concurrency", concurrencies)
        return [Load(concurrency=c) for c in concurrencies]
    return None


def _unique(flag: str, values: tuple[float, ...] | tuple[int, ...]) -> None:
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise ConfigError(flag, f"{twice[0]:g} is given twice; give each load once")


NOT_WITH = ("find_max_rate", "warmup", "server_metrics", "ramp_up")  # each measures one load


def check_config(config: ServeConfig) -> None:
    """Refuse what a sweep does not combine with (each point is one load, measured whole)."""
    for name in NOT_WITH:
        if getattr(config, name):
            raise ConfigError(
                "--" + name.replace("_", "-"), "not with a sweep of loads (--rate or --concurrency lists)"
            )


@dataclass(frozen=True)
class Verdicts:
    """How a point is held to --slo: the rate search's percentile and confidence."""

    slo: dict[str, float]
    percentile: float = 0.99
    confidence: float = 0.95


@dataclass
class Point:
    load: Load
    measured: Measured
    verdict: str | None = None  # pass, fail, undecided; None without --slo or for a cut point
    latency_ms: dict[str, dict[str, Any]] = field(default_factory=dict)  # the verdict's figures

    @property
    def cut(self) -> str | None:
        return self.measured.cut


@dataclass
class Sweep:
    points: list[Point] = field(default_factory=list)
    stopped: str = DONE


def run_sweep(
    runner: Runner,
    loads: list[Load],
    budget_s: float | None,
    started: float,
    say: Callable[[str], None],
    verdicts: Verdicts | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Sweep:
    """Send each load in turn (module docstring); ``started`` is on ``clock``'s scale (the budget
    counts from it). One Ctrl-C stops it all."""
    sweep = Sweep()
    try:
        for number, load in enumerate(loads, 1):
            left = math.inf if budget_s is None else budget_s - FINISH_S - (clock() - started)
            if left <= 0:
                say(f"  stopped: --budget is spent; {load.label} and after not sent")
                sweep.stopped = BUDGET
                break
            say(f"  point {number} of {len(loads)}: {load.label}")
            measured = runner.measure_at(load.rate, load.concurrency, left)
            if measured.cut == BUDGET and left >= runner.deadline_s:  # --deadline, not the budget:
                measured = Measured(measured.samples, measured.slowest_s, None, measured.record)
            point = Point(load, measured)
            sweep.points.append(point)
            if measured.cut is not None:
                sweep.stopped = measured.cut
                break
            if verdicts is not None:
                point.verdict, point.latency_ms = verdict(
                    measured.samples, verdicts.slo, verdicts.percentile, verdicts.confidence
                )
    except KeyboardInterrupt:  # between points
        sweep.stopped = INTERRUPTED
    return sweep


def curve_point(point: Point, section: Serving) -> CurvePoint:
    """One point of the curve, from its serving section's figures."""
    return serving_curve.curve_point(point.load, point.cut, point.verdict, section)
