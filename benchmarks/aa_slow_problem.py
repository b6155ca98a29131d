"""A zoo problem, and the same problem made slower by a wait in every step, sized from the last one.

benchmarks/aa.py runs side A with ``make_problem`` and side B with ``make_slow_problem``. Both
read the environment, which the spawned runs inherit:

- FLOWRATE_AA_BASE: the zoo problem, "fc_mnist" or "transformer:mini" (problem:size);
- FLOWRATE_AA_SLOWDOWN: the slow one's planted slowdown, e.g. 0.05: every step waits
  slowdown / (1 − slowdown) of the previous step's own work (the process's CPU time since the
  previous step began, less that step's wait), so the slow side runs at 95% of what the same
  process would otherwise do, whatever the load on the machine at the time. (A wait sized once,
  from a step measured at the start, is a different slowdown whenever the machine's load changes:
  5% of a step measured under load is 15% of a quiet one.)

The work and the wait are counted on the process's CPU clock (time.process_time), not the wall
clock: a run that takes turns with another (flowrate.campaigns.process.turns) waits for its turn
between two steps without using the CPU, and on the wall clock that wait would count as a step's
work (a wait sized from it planted 10%, not 5%). The wait is a spin, not time.sleep: a step of
fc_mnist takes a few milliseconds here, and sleeping a tenth of a millisecond overshoots by about
as much again. On a CPU the step is
synchronous, so the spin adds its time to the step; but not only its time, it seems: on this VM,
at a wait of 5/95 of the previous step's work, the A/B comparisons of fc_mnist measured B/A 0.937
(95% interval 0.930-0.944, 20 comparisons of 16-36 runs a side) and 0.942 (0.936-0.948), not
0.95, while transformer/mini's measured 0.950 (0.933-0.968). Hence FLOWRATE_AA_FACTOR, the
wait as a share of the previous step's work (slowdown / (1 − slowdown) where unset), which
benchmarks/aa.py sets from its --wait-factor; aa.py reports the B/A its A/B comparisons
measured, so the slowdown they were counted at is on record. (Sizing the factor in-process
within a minute did not work: blocks of 0.2 s of fc_mnist's steps differed by more than the 1% to
be found.)
"""

from __future__ import annotations

import os
import time

import torch
from torch import nn

import flowrate
from flowrate.problems.registry import get_problem


def _base() -> flowrate.Problem:
    name, _, size = os.environ.get("FLOWRATE_AA_BASE", "fc_mnist").partition(":")
    return get_problem(name, size or None)


def _spin(seconds: float) -> None:
    """Use ``seconds`` of this process's CPU time."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def make_problem() -> flowrate.Problem:
    """The zoo problem as it is (side A)."""
    return _base()


def make_slow_problem() -> flowrate.Problem:
    """The zoo problem with every step FLOWRATE_AA_SLOWDOWN slower (side B)."""
    problem = _base()
    slowdown = float(os.environ.get("FLOWRATE_AA_SLOWDOWN", "0"))
    factor = float(os.environ.get("FLOWRATE_AA_FACTOR") or slowdown / (1 - slowdown))
    zoo_class = type(problem)
    last = {"began": 0.0, "waited": 0.0}  # the previous step's start and wait (none before the first)

    class Slowed(zoo_class):  # type: ignore[misc, valid-type]
        def loss(self, model: nn.Module, batch: flowrate.Batch) -> torch.Tensor:
            now = time.process_time()
            wait = factor * (now - last["began"] - last["waited"]) if last["began"] else 0.0
            _spin(wait)
            last["began"], last["waited"] = now, wait
            return super().loss(model, batch)

    problem.__class__ = Slowed  # the same problem (shape, FLOPs), its steps longer
    # its own name, as other code would be at another commit: the store's noise history keeps the
    # two apart instead of taking the 5% between them for noise (aa.py passes --force)
    problem.name = f"{problem.name}-slowed"
    return problem
