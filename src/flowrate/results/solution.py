"""--to-solution: the wall time (and, at the user's prices, the cost) a job of a given size would
take at this run's measured GlobalRate.

    seconds = amount ÷ GlobalRate (samples/s, or tokens/s for an amount of tokens)
    cost = seconds × the run's dollars per second (flowrate.results.cost), where priced

The projection rests on this run alone: one process (or the ranks it ran on), this batch and
configuration, the rate of its timed window held for the whole job.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Solution:
    """A job's projected wall time and cost at the measured rate; None with the reason where the
    run has no such rate."""

    amount: float = 0.0
    unit: str = ""  # tokens or samples
    rate_per_sec: float | None = None  # the measured GlobalRate in the job's unit
    seconds: float | None = None
    dollars: float | None = None  # at the run's dollars per second; None: not priced
    rests_on: str = ""  # the measurements the projection takes
    reason: str | None = None


def project(
    amount: float,
    unit: str,
    samples_per_sec: float,
    tokens_per_sec: float | None,
    dollars_per_sec: float | None,
) -> Solution:
    """``amount`` of ``unit`` at the run's GlobalRate (and its dollars per second, where priced)."""
    rate = tokens_per_sec if unit == "tokens" else samples_per_sec
    if not rate:
        why = "the problem has no tokens" if unit == "tokens" else "the run processed no samples"
        return Solution(amount, unit, reason=f"--to-solution: {why}")
    seconds = amount / rate
    rests_on = f"GlobalRate {rate:.6g} {unit}/s of this run's timed window"
    if dollars_per_sec is not None:
        rests_on += f", {dollars_per_sec:.6g} $/s at the given prices"
    dollars = seconds * dollars_per_sec if dollars_per_sec is not None else None
    return Solution(amount, unit, rate, seconds, dollars, rests_on)
