"""Multi-fidelity for an exploration: the rungs of run length, and who is promoted up them.

Successive halving over duration: every configuration first runs short (the lowest rung), and
only those that could still be on the frontier run longer, up to the full duration. Each rung
is ``eta`` times longer than the one below, and runs proportionally fewer preheat and minimum
timed steps (loop_steps): a slow configuration's run is bound by its step counts, not
its duration, and would cost a short rung as much as a full one.

A configuration at rung k is promoted when nothing else measured at rung k dominates it beyond
noise: rank 0 of the rung's non-dominated sorting (multi-objective ASHA's rule, never a weighted
sum of objectives). A short run's figure is noisier, and a configuration only a little behind
another at rung k may still lead at full length, so a configuration is out only when another is
better on every objective with confidence (beats: ``Z`` standard errors of both measurements,
beyond the 1% a measurement resolves); one within noise of the leaders runs longer to tell.
ASHA's cap of one in ``eta`` per rung is not applied: every frontier point has to run full length
anyway, and in benchmarks/explore_efficiency.py's replays the cap only delayed them
(benchmarks/notes/).

A rung run as a fresh process pays the start-up again, so a configuration that reached full
length through r such rungs paid r start-ups, and its lower rungs' timed steps again at each.
So a configuration goes on in its own process instead (Continuation, run by
flowrate.campaigns.rungs.watch): it runs once, at full length, and at the end of each
lower rung it is measured and stops if a rival measured at that rung beats it beyond noise: the
same rule, decided as the run reaches the rung against everything measured there so far
(asynchronous, as ASHA promotes). A rival measured again at a higher rung is judged by its
longest run's figures (flowrate.campaigns.explore.engine.Exploration._standing). Where a process
cannot go on (an objective metered only over a whole run: energy, power), each rung is a run of
its own. Either way, a point
stopped at its rung (the initial design's, which nothing measured could judge as they ran) is
promoted to a run of its own once twice the initial design is measured at the lowest rung, or
sooner when the budget runs short (flowrate.campaigns.explore.engine.JUDGED_AFTER;
benchmarks/explore_efficiency.py measures it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TIE = 0.01  # figures within 1% of each other are equal (flowrate.analysis.pareto's TIE)
Z = 1.0  # standard errors a difference must exceed to be told apart from noise


@dataclass(frozen=True)
class Fidelity:
    """The durations configurations run at, shortest first; the last is the full duration."""

    durations: tuple[float, ...]
    eta: int = 3
    z: float = Z  # standard errors a promotion's comparison allows for

    @classmethod
    def ladder(cls, duration_s: float, min_duration_s: float | None, eta: int = 3, z: float = Z) -> Fidelity:
        """Rungs duration/eta^k down to min_duration (one rung: no multi-fidelity)."""
        if min_duration_s is None or min_duration_s >= duration_s:
            return cls((duration_s,), eta, z)
        steps = math.floor(math.log(duration_s / min_duration_s, eta) + 1e-9)
        if steps < 1:  # shorter, but not eta times shorter: two rungs anyway
            return cls((min_duration_s, duration_s), eta, z)
        return cls(tuple(duration_s / eta**k for k in range(steps, -1, -1)), eta, z)

    @property
    def top(self) -> int:
        return len(self.durations) - 1


def loop_steps(share: float, preheat_steps: int, min_steps: int) -> tuple[int, int]:
    """The preheat and minimum timed steps of a rung ``share`` of the full duration long: the full
    run's, scaled with its duration, never below 2 (the preheat's step time excludes the first
    step; a figure's noise needs two intervals) unless the full run has fewer."""
    return (
        max(min(preheat_steps, 2), math.ceil(preheat_steps * share - 1e-9)),
        max(min(min_steps, 2), math.ceil(min_steps * share - 1e-9)),
    )


@dataclass(frozen=True)
class Measured:
    """A configuration's figures at one rung, oriented so that larger is better, with their noise."""

    key: str
    gains: tuple[float, ...]  # each objective's value, negated where smaller is better
    noise: tuple[float, ...]  # each figure's standard error (0 when unknown)


def beats(a: Measured, b: Measured, z: float = Z, tie: float = TIE) -> bool:
    """Whether a dominates b even allowing for noise: nowhere possibly worse (by more than the
    1% a measurement resolves, once ``z`` standard errors of both are allowed for), and somewhere
    surely better (by more than both). Without noise: dominance with 1% ties."""
    better = False
    for x, y, nx, ny in zip(a.gains, b.gains, a.noise, b.noise, strict=True):
        noise = z * math.hypot(nx, ny)
        resolution = tie * max(abs(x), abs(y))
        if x - y < noise - resolution:
            return False
        better = better or x - y > noise + resolution
    return better


def first_front(points: Sequence[Measured], z: float = Z, tie: float = TIE) -> list[Measured]:
    """Rank 0 of non-dominated sorting: the points nothing beats (in the given order)."""
    return [p for p in points if not any(beats(q, p, z, tie) for q in points if q is not p)]


@dataclass(frozen=True)
class Continuation:
    """How a configuration's run goes on past its rung in its own process (module docstring).

    ``durations``: the rungs it may reach, its own first, the full duration last; ``rivals``: for
    each but the last, the configurations measured at that rung (its own measurements left out);
    ``objectives``: each objective's metric and whether larger is better, in the rivals' order.
    """

    durations: tuple[float, ...]
    rivals: tuple[tuple[Measured, ...], ...]
    objectives: tuple[tuple[str, bool], ...]
    z: float = Z

    def goes_on(self, step: int, values: Mapping[str, float], noise: Mapping[str, float]) -> bool:
        """Whether the run goes on past rung ``step`` (counted from its own) having measured
        ``values`` (with their standard errors ``noise``) there: nothing measured at that rung
        beats it beyond noise. A figure it cannot read there leaves it running: it cannot be told
        apart."""
        if step >= len(self.rivals):
            return False
        if any(name not in values for name, _ in self.objectives):
            return True
        gains = tuple(values[name] if larger else -values[name] for name, larger in self.objectives)
        measured = Measured("", gains, tuple(noise.get(name, 0.0) for name, _ in self.objectives))
        return not any(beats(rival, measured, self.z) for rival in self.rivals[step])

    def to_dict(self) -> dict[str, Any]:
        rivals = [[[m.key, list(m.gains), list(m.noise)] for m in rung] for rung in self.rivals]
        objectives = [list(o) for o in self.objectives]
        return {"durations": list(self.durations), "rivals": rivals, "objectives": objectives, "z": self.z}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Continuation:
        rivals = tuple(
            tuple(Measured(key, tuple(gains), tuple(noise)) for key, gains, noise in rung)
            for rung in data["rivals"]
        )
        objectives = tuple((str(name), bool(larger)) for name, larger in data["objectives"])
        return cls(tuple(data["durations"]), rivals, objectives, float(data["z"]))
