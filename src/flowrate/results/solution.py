"""--to-solution: the wall time (and, at the user's prices, the cost) a job of a given size would
take at this run's measured GlobalRate, and at N devices given a `flowrate scaling` study.

    seconds = amount ÷ GlobalRate (samples/s, or tokens/s for an amount of tokens)
    cost = seconds × the run's dollars per second (flowrate.results.cost), where priced

An amount in epochs is that many passes over the run's --data set: epochs × its samples.

The projection rests on this run alone: one process (or the ranks it ran on), this batch and
configuration, the rate of its timed window held for the whole job.

At N devices (``at_devices``), with the study's weak-scaling efficiency e(N) against its
baseline (flowrate.campaigns.scaling.run) and this run on W devices, one of the study's sizes:

    rate(N) = GlobalRate × (N / W) × e(N) / e(W)
    dollars per second at N = the run's dollars per second × N / W

so the price is taken per device: a job's cost at N devices is its cost here × e(W) / e(N).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from flowrate.config.amount import EPOCHS


@dataclass(frozen=True)
class DeviceProjection:
    """The job at one of a scaling study's sizes, and the study's run that measured it."""

    devices: int
    efficiency: float  # the study's weak-scaling efficiency against its baseline
    rate_per_sec: float  # in the job's unit (samples for epochs)
    seconds: float
    dollars: float | None  # None: not priced
    run_id: str


@dataclass(frozen=True)
class ScalingPointRef:
    """What a projection to N devices takes of a scaling study's point (ScalingPoint's figures)."""

    processes: int
    efficiency: float
    run_id: str


@dataclass(frozen=True)
class Solution:
    """A job's projected wall time and cost at the measured rate; None with the reason where the
    run has no such rate."""

    amount: float = 0.0
    unit: str = ""  # tokens, samples or epochs
    rate_per_sec: float | None = None  # the measured GlobalRate in the job's unit (samples for epochs)
    seconds: float | None = None
    dollars: float | None = None  # at the run's dollars per second; None: not priced
    rests_on: str = ""  # the measurements the projection takes
    reason: str | None = None
    samples_per_epoch: int | None = None  # epochs: the --data set's samples
    devices: list[DeviceProjection] = field(default_factory=list)  # at a scaling study's sizes
    devices_rest_on: str = ""  # the study and the runs its efficiencies come from
    devices_reason: str | None = None  # why there is no projection to N devices


def project(
    amount: float,
    unit: str,
    samples_per_sec: float,
    tokens_per_sec: float | None,
    dollars_per_sec: float | None,
    samples_per_epoch: int | None = None,
) -> Solution:
    """``amount`` of ``unit`` at the run's GlobalRate (and its dollars per second, where priced);
    epochs take ``samples_per_epoch`` (the --data set's samples)."""
    rate = tokens_per_sec if unit == "tokens" else samples_per_sec
    if unit == EPOCHS and not samples_per_epoch:
        why = "epochs count the samples of a --data set, and this run read none"
        return Solution(amount, unit, reason=f"--to-solution: {why}")
    if not rate:
        why = "the problem has no tokens" if unit == "tokens" else "the run processed no samples"
        return Solution(amount, unit, reason=f"--to-solution: {why}")
    work = amount * samples_per_epoch if unit == EPOCHS and samples_per_epoch else amount
    seconds = work / rate
    rate_unit = "samples" if unit == EPOCHS else unit
    rests_on = f"GlobalRate {rate:.6g} {rate_unit}/s of this run's timed window"
    if unit == EPOCHS:
        rests_on += f", {samples_per_epoch} samples per epoch of the --data set"
    if dollars_per_sec is not None:
        rests_on += f", {dollars_per_sec:.6g} $/s at the given prices"
    dollars = seconds * dollars_per_sec if dollars_per_sec is not None else None
    return Solution(amount, unit, rate, seconds, dollars, rests_on, samples_per_epoch=samples_per_epoch)


def at_devices(
    solution: Solution,
    study: str,
    points: Sequence[ScalingPointRef],
    devices_here: int,
    dollars_per_sec: float | None,
) -> Solution:
    """``solution`` projected to each of a scaling study's sizes (module docstring): this run ran on
    ``devices_here`` devices, which must be one of the study's sizes."""
    if solution.seconds is None or solution.rate_per_sec is None:
        return dataclasses.replace(solution, devices_reason=solution.reason)
    here = next((p for p in points if p.processes == devices_here), None)
    if here is None or here.efficiency <= 0:
        sizes = ", ".join(str(p.processes) for p in points)
        why = f"this run ran on {devices_here} device(s), not one of the study's sizes ({sizes})"
        return dataclasses.replace(solution, devices_reason=f"--scaling {study}: {why}")
    work = solution.seconds * solution.rate_per_sec
    projected = []
    for point in sorted(points, key=lambda p: p.processes):
        share = point.processes / devices_here
        rate = solution.rate_per_sec * share * point.efficiency / here.efficiency
        seconds = work / rate
        dollars = seconds * dollars_per_sec * share if dollars_per_sec is not None else None
        made = DeviceProjection(point.processes, point.efficiency, rate, seconds, dollars, point.run_id)
        projected.append(made)
    base = min(points, key=lambda p: p.processes)
    rests = (
        f"scaling study {study}: efficiencies against its {base.processes}-device run, from runs "
        + ", ".join(p.run_id for p in sorted(points, key=lambda p: p.processes))
    )
    if dollars_per_sec is not None:
        rests += "; priced per device"
    return dataclasses.replace(solution, devices=projected, devices_rest_on=rests)
