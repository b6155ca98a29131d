"""A zoo problem, and the same problem made slower by a calibrated wait in every step.

benchmarks/aa.py runs side A with ``make_problem`` and side B with ``make_slow_problem``. Both
read the environment, which the spawned runs inherit:

- FLOWRATE_AA_BASE: the zoo problem, "fc_mnist" or "transformer:mini" (problem:size);
- FLOWRATE_AA_WAIT_S: seconds added to every step of the slow one (aa.py sizes it from a
  measured step time so that the slow side runs at 95% of the samples/s).

The wait is a spin on the clock, not time.sleep: a step of fc_mnist takes a few milliseconds here,
and sleeping a tenth of a millisecond overshoots by about as much again. On a CPU the step is
synchronous, so the spin adds its time to the step and nothing else.
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
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def make_problem() -> flowrate.Problem:
    """The zoo problem as it is (side A)."""
    return _base()


def make_slow_problem() -> flowrate.Problem:
    """The zoo problem with FLOWRATE_AA_WAIT_S more in every step (side B)."""
    problem = _base()
    wait = float(os.environ.get("FLOWRATE_AA_WAIT_S", "0"))
    zoo_class = type(problem)

    class Slowed(zoo_class):  # type: ignore[misc, valid-type]
        def loss(self, model: nn.Module, batch: flowrate.Batch) -> torch.Tensor:
            _spin(wait)
            return super().loss(model, batch)

    problem.__class__ = Slowed  # the same problem (name, shape, FLOPs), its steps longer
    return problem
