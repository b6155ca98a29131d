"""Pricing a recorded run afterwards: the cost model's prediction for a run that recorded none,
from the calibration of the machine it ran on (its fingerprint: host, device, CPU model, threads).
flowrate.analysis.estimate_drift draws what these prices say against what was measured."""

from __future__ import annotations

from collections.abc import Callable

from flowrate.config import RunConfig
from flowrate.errors import FlowrateError
from flowrate.estimate.calibration import Calibration, load_calibrations
from flowrate.estimate.cost import estimate_step
from flowrate.estimate.devices import device_model
from flowrate.estimate.report import COST_MODEL, trace_for
from flowrate.measure.peaks import find_device
from flowrate.problems.registry import get_problem
from flowrate.results.noise import machine
from flowrate.results.schema import Result

Priced = tuple[float | None, str, str | None]  # samples/s, where it came from or why none, cost model


def recompute_with_calibration() -> Callable[[Result], Priced]:
    """A pricer that uses the calibration whose machine fingerprint (host, device, CPU model,
    threads) is the run's, tracing each configuration once; a run from a machine never calibrated
    (or calibrated under another fingerprint) gets none, saying so."""
    calibrations = list(load_calibrations().values())
    priced: dict[str, Priced] = {}

    def price(result: Result) -> Priced:
        here = machine(result)
        match = next((c for c in calibrations if c.fingerprint == here), None)
        if match is None:
            return (
                None,
                f"no calibration of {here.get('device_name') or 'its device'} from that machine",
                None,
            )
        key = repr((result.config, result.problem.name, result.batch_size, match.device))
        if key not in priced:
            priced[key] = _price(result, match)
        return priced[key]

    return price


def _price(result: Result, calibration: Calibration) -> Priced:
    recorded = result.config
    if not isinstance(recorded, RunConfig):
        return None, f"not recomputed: a {result.kind} record has no step to model", None
    try:
        config = RunConfig.from_dict(recorded.to_dict())  # checked, as a run's settings are
        problem = get_problem(config.problem, config.size, config.problem_options)
        config = config.for_problem(problem.modes, problem.default_mode, problem.name)
        model = device_model(calibration.device, find_device(calibration.device), calibration, None)
        trace = trace_for(config, problem, result.batch_size, model)
        step = estimate_step(trace, model, problem.tokens_per_sample)
    except FlowrateError as why:
        return None, f"not recomputed: {why}", None
    return (
        step.samples_per_sec,
        f"recomputed with the calibration of {calibration.device} ({calibration.measured_at[:10]})",
        COST_MODEL,
    )
