"""Which roofline bound an operator's measured time sits under, and the time it loses against it.

An operator that does F FLOPs and moves B bytes cannot take less than

    bound_s = max(F / peak FLOP/s, B / peak bytes/s)

on a device with those peaks. Its arithmetic intensity F / B, against the device's ridge point
(peak FLOP/s ÷ peak bytes/s), says which term is the larger: above the ridge the operator is
compute-bound, at or below it memory-bound. An operator whose measured time is more than
LAUNCH_FACTOR times its bound (or that does no work the roofline prices: no FLOPs, no bytes) is
neither: its time is launch and framework overhead. The time lost against the bound is
``seconds - bound_s`` (all of it, for overhead with no priced work).

The peaks are the device's datasheet figures where the peak table has them
(flowrate.measure.peaks), or a calibration's achieved rates; with neither there is no ridge
point, and the bound is unknown rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

COMPUTE = "compute"
MEMORY = "memory"
OVERHEAD = "overhead"
UNKNOWN = "unknown"

# A measured time this many times its roofline bound is launch/framework overhead, not the bound.
LAUNCH_FACTOR = 10.0


@dataclass(frozen=True)
class Roof:
    """A device's two peaks and where they come from."""

    peak_flops: float  # FLOP/s
    peak_bandwidth: float  # bytes/s, read + write
    source: str  # the datasheet, or the calibration, that gives them

    @property
    def ridge(self) -> float:
        """The arithmetic intensity (FLOPs per byte) where compute and memory take equal time."""
        return self.peak_flops / self.peak_bandwidth


@dataclass(frozen=True)
class Placement:
    """An operator's place under the roofline: its bound, the bound's time and the time lost."""

    bound: str  # COMPUTE, MEMORY, OVERHEAD or UNKNOWN
    bound_s: float | None  # the least time the roofline allows; None: no roof
    lost_s: float | None  # measured seconds - bound_s; None: no roof


def place(flops: float, nbytes: float, seconds: float, roof: Roof | None) -> Placement:
    """Where an operator of ``flops`` FLOPs and ``nbytes`` bytes measured at ``seconds`` sits
    under ``roof`` (None: no peaks known, so its bound is unknown)."""
    if flops == 0 and nbytes == 0:  # no work any roof prices: its time is overhead on every device
        return Placement(OVERHEAD, 0.0, seconds)
    if roof is None:
        return Placement(UNKNOWN, None, None)
    bound_s = max(flops / roof.peak_flops, nbytes / roof.peak_bandwidth)
    if seconds > LAUNCH_FACTOR * bound_s:
        return Placement(OVERHEAD, bound_s, seconds - bound_s)
    intensity = flops / nbytes if nbytes else float("inf")
    bound = COMPUTE if intensity > roof.ridge else MEMORY
    return Placement(bound, bound_s, seconds - bound_s)
