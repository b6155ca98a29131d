"""`flowrate run --to-solution AMOUNT --scaling STUDY`: the job's wall time and cost at each size of a
stored `flowrate scaling` study, with the efficiency the study measured.

The study is named by its name (its runs are tagged scaling:NAME), by the id of one of its runs,
or by the file `flowrate scaling --json` wrote (its points' runs read from the store), in the store
the run records to (the default store under --no-store). Before the run, the
study must exist and have measured this run's problem, size, mode, precision, execution and
optimizer; after it, the problem's shape and the batch per device are compared with the study's
runs too, and a difference leaves the projection out, saying which. The efficiencies are computed
as `flowrate scaling` computes them (flowrate.campaigns.scaling.run.efficiency), from the newest
run of each size; the arithmetic is flowrate.results.solution.at_devices.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowrate.config import RunConfig
from flowrate.errors import ConfigError, FlowrateError
from flowrate.results.compare import problem_identity
from flowrate.results.configs import SharedConfig, as_text
from flowrate.results.schema import Result
from flowrate.results.solution import ScalingPointRef, at_devices

if TYPE_CHECKING:
    from flowrate.results.store import Store

FIELD = "scaling"
TAG = "scaling:"


@dataclass(frozen=True)
class Study:
    name: str
    runs: tuple[Result, ...]  # the newest run of each size, smallest size first


def devices(result: Result) -> int:
    return result.distributed.world_size if result.distributed is not None else 1


def batch_per_device(result: Result) -> int:
    found = result.distributed.batch_size_per_rank if result.distributed is not None else None
    return found if found is not None else result.batch_size


def load_study(store: Store, ref: str) -> Study:
    """The study ``ref`` names in ``store``; ConfigError("scaling") where it names none."""
    from flowrate.results.store_filter import RunFilter

    if Path(ref).is_file():
        return _from_report(store, ref)
    name = ref.strip()
    tagged = store.runs(RunFilter(tag=TAG + name)) if name else []
    if not tagged and name:
        try:
            run = store.get(name)
        except FlowrateError:
            run = None
        found = next((t for t in run.tags if t.startswith(TAG)), None) if run is not None else None
        if found is not None:
            name = found.removeprefix(TAG)
            tagged = store.runs(RunFilter(tag=found))
    if not tagged:
        raise ConfigError(
            FIELD,
            f"{ref!r} names no `flowrate scaling` study (its name, or one of its runs' ids) in "
            f"{store.path}; `flowrate runs` lists runs and their scaling:NAME tags",
        )
    newest: dict[int, Result] = {}
    for stored in tagged:  # newest first
        newest.setdefault(devices(stored.result), stored.result)
    return Study(name, tuple(newest[n] for n in sorted(newest)))


def _from_report(store: Store, path: str) -> Study:
    """A `flowrate scaling --json` report's study: its name and its points' runs, from the store."""
    try:
        report = json.loads(Path(path).read_text(encoding="utf-8"))
        name, ids = str(report["name"]), [str(point["run_id"]) for point in report["points"]]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        raise ConfigError(FIELD, f"{path} is not a `flowrate scaling --json` report") from None
    runs = []
    for run_id in ids:
        try:
            runs.append(store.get(run_id).result)
        except FlowrateError:
            raise ConfigError(FIELD, f"{path}: its run {run_id} is not in {store.path}") from None
    if not runs:
        raise ConfigError(FIELD, f"{path}: the report has no points")
    return Study(name, tuple(sorted(runs, key=devices)))


def same_settings(config: SharedConfig) -> dict[str, str | None]:
    """The settings a study must share with the run, checked before it."""
    return {
        "problem": config.problem,
        "size": config.size,
        "mode": as_text(config.mode),
        "precision": as_text(config.precision),
        "execution": as_text(config.execution),
        "optimizer": as_text(config.optimizer),
    }


def study_for_run(
    ref: str, config: RunConfig, repeat: int, opened: Store | None, store: str | None = None
) -> Study:
    """The --scaling study ``ref`` names, found and checked before the run: in ``opened`` (the
    store the run records to), else (--no-store, a rank other than 0) read from the store at
    ``store`` (None: the default store)."""
    from flowrate.results.store import Store

    if config.to_solution is None:
        raise ConfigError(FIELD, "projects a job's time to solution: give --to-solution AMOUNT too")
    if repeat > 1:
        raise ConfigError(FIELD, "projects one run's time to solution: give it without --repeat")
    if opened is not None:
        study = load_study(opened, ref)
    else:
        with Store(store, readonly=True) as reading:
            study = load_study(reading, ref)
    check_study(study, config)
    return study


def check_study(study: Study, config: RunConfig) -> None:
    """Before the run: the study measured this configuration (same_settings)."""
    mine, theirs = same_settings(config), same_settings(study.runs[0].config)
    for key, value in mine.items():
        if value is not None and theirs[key] != value:
            raise ConfigError(
                FIELD,
                f"study {study.name} measured {key} {theirs[key]!r}, this run {value!r}: "
                "give the study of this configuration",
            )


def projected(result: Result, study: Study) -> Result:
    """``result`` with its time to solution at each of the study's sizes (module docstring)."""
    from flowrate.campaigns.scaling.run import efficiency

    solution = result.solution
    if solution is None:
        return result
    why = _differs(result, study)
    if why is not None:
        reason = f"--scaling {study.name}: {why}: no projection to its sizes"
        return dataclasses.replace(result, solution=dataclasses.replace(solution, devices_reason=reason))
    report = efficiency([(devices(r), r) for r in study.runs], study.name, None)
    points = [ScalingPointRef(p.processes, p.efficiency, p.run_id) for p in report.points]
    per_sec = result.cost.dollars_per_sec if result.cost is not None else None
    return dataclasses.replace(
        result, solution=at_devices(solution, study.name, points, devices(result), per_sec)
    )


def _differs(result: Result, study: Study) -> str | None:
    here: dict[str, Any] = {**problem_identity(result), "batch per device": batch_per_device(result)}
    for run in study.runs:
        there: dict[str, Any] = {**problem_identity(run), "batch per device": batch_per_device(run)}
        for key, value in here.items():
            if there.get(key) != value:
                return f"its run {run.run_id} measured {key} {there.get(key)!r}, this run {value!r}"
    return None
