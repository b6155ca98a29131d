"""Points an exploration proposes itself rather than asking its sampler (flowrate.campaigns.explore.engine).

- **The frontier's neighbour**: after the initial design, every POLISH_EVERY-th new configuration
  is an unmeasured point one step along one axis from a configuration on the lowest rung's
  frontier, the best on the first objective first. Why: the sampler's model is fit to single
  noisy measurements, and it often never tries the point beside the best one it found (the other
  optimizer at the same batch, the next batch); proposing that neighbour finds that point where the
  sampler alone misses it, at a small cost on one of the recorded grids
  (benchmarks/explore_efficiency.py's replays: benchmarks/notes/, "the frontier's
  neighbours"). Successive
  halving's compute ratio rises with it, since the full-length search it is measured against
  finds more. Every second configuration rather than the budget's last quarter: a budget in
  hours has no known last quarter of configurations, and successive halving's search, which
  measures many more configurations for the same compute, gets neighbours from its start.
- **An unmeasured point at random**, when the sampler keeps proposing measured ones.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Collection, Sequence
from typing import Any

from flowrate.campaigns.explore.space import SearchSpace
from flowrate.results.store import point_key

POLISH_EVERY = 2


def polishing(measured: int, initial: int) -> bool:
    """Whether the next new configuration, after ``measured`` at the lowest rung or pending there,
    is the frontier's neighbour (module docstring): never within the initial design."""
    after = measured - initial
    return after >= 0 and after % POLISH_EVERY == POLISH_EVERY - 1


def frontier_neighbour(
    space: SearchSpace, front: Sequence[dict[str, Any]], taken: Collection[str]
) -> dict[str, Any] | None:
    """The first point one step from a configuration of ``front`` (in its order; along the axes'
    order) that is not ``taken`` (by point key), or None."""
    for params in front:
        for near in space.neighbours(params):
            if point_key(near) not in taken:
                return near
    return None


def unmeasured(space: SearchSpace, taken: Collection[str], rng: random.Random) -> dict[str, Any] | None:
    """A point of the space not ``taken`` (by point key), drawn with ``rng``, or None."""
    if len(taken) >= space.size:
        return None
    axes = space.axes
    for _ in range(1000):  # a large space: random draws find an unmeasured point at once
        params = {a.name: rng.choice(a.values) for a in axes}
        if point_key(params) not in taken:
            return params
    every = (
        dict(zip([a.name for a in axes], combo, strict=True))
        for combo in itertools.product(*(a.values for a in axes))
    )
    return next((p for p in every if point_key(p) not in taken), None)
