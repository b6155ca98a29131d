"""MFU against what this machine achieves: a stored survey's maximum matmul FLOP/s.

A run whose --measure-peak did not run gets, after it ran and before it is shown and recorded,
its MFU against the matmul maximum of the newest stored survey of the same machine (device, CPU,
PyTorch and CUDA versions, threads: environment_fingerprint less the flowrate version) at the
precision its matmuls compute in — beside the datasheet MFU, labelled with the survey's id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING

from flowrate.results.environment import environment_fingerprint
from flowrate.results.schema import Result
from flowrate.results.sections import Kind

if TYPE_CHECKING:
    from flowrate.results.store import Store


def _machine(result: Result) -> dict[str, object]:
    found = environment_fingerprint(result.environment)
    found.pop("flowrate_version")
    return found


def against_survey(result: Result, surveys: Iterable[Result]) -> Result:
    """``result`` with its MFU against the first of ``surveys`` (newest first) of the same machine
    that has a matmul figure at the run's precision; unchanged where --measure-peak ran, where the
    run has no model FLOPs, or where no survey fits."""
    from flowrate.harness.survey import matmul_max
    from flowrate.measure.peaks import precision_key

    f = result.flops
    precision = result.config.precision
    if result.kind is not Kind.RUN or f.measured_peak_flops is not None or not f.model_flops_per_sec:
        return result
    if precision is None:
        return result
    key = precision_key(str(precision))
    machine = _machine(result)
    for survey in surveys:
        if survey.kind is not Kind.SURVEY or survey.survey is None or _machine(survey) != machine:
            continue
        peak = matmul_max(survey.survey, key)
        if peak is None:
            continue
        flops = dataclasses.replace(
            f,
            measured_peak_flops=peak,
            mfu_of_measured_peak=f.model_flops_per_sec / peak,
            measured_peak_source=f"survey {survey.run_id}",
        )
        return dataclasses.replace(result, flops=flops)
    return result


def from_store(result: Result, store: Store | None) -> Result:
    """against_survey over the surveys ``store`` holds (none without a store)."""
    if store is None or result.kind is not Kind.RUN or result.flops.measured_peak_flops is not None:
        return result
    from flowrate.results.store_filter import RunFilter

    surveys = (run.result for run in store.runs(RunFilter(problem="survey")))
    return against_survey(result, surveys)
