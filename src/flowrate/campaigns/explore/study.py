"""The Optuna side of an exploration: which sampler, how an axis maps to Optuna's distributions,
and the study's identity (flowrate.campaigns.explore.engine runs the study).

Why the sampler per space (choose_sampler): a Gaussian process models a small space well from few
points and picks the next by expected hypervolume gain; Optuna's takes categorical axes (a
Hamming distance). On the recorded transformer grids (3 of 4 axes categorical), replayed by
benchmarks/explore_efficiency.py, its searches reach a higher median share of the grid's
hypervolume than TPE's or random search's (benchmarks/notes/). Its fit per proposal grows
with the trials, so a budget over GP_MAX_RUNS runs or in hours, or a space over GP_MAX_SPACE
points, goes to TPE: cheap per proposal, categorical axes native. NSGA-II needs generations of a
population: budgets of 300 runs or more.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from flowrate.campaigns.explore.plan import Budget, ExploreSpec, sampler_kind
from flowrate.campaigns.explore.space import Axis, SearchSpace
from flowrate.errors import ConfigError

if TYPE_CHECKING:
    import optuna


def choose_sampler(space: SearchSpace, budget: Budget, initial: int, seed: int, kind: str = "auto") -> Any:
    """The sampler for this space (module docstring says why), seeded; ``kind`` forces one."""
    import optuna

    if kind == "auto":
        kind = sampler_kind(space, budget)
    common: dict[str, Any] = {"seed": seed}  # constraints: set on each trial (_tell)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if kind == "gp":
            return optuna.samplers.GPSampler(n_startup_trials=initial, **common)
        if kind == "nsga2":
            return optuna.samplers.NSGAIISampler(population_size=max(initial, 20), **common)
        if kind == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        return optuna.samplers.TPESampler(n_startup_trials=initial, multivariate=True, **common)


def distribution(axis: Axis) -> Any:
    from optuna.distributions import CategoricalDistribution, IntDistribution

    if axis.log2:  # searched by the exponent: 1 and 2 are as far apart as 256 and 512
        return IntDistribution(0, len(axis.values) - 1)
    if axis.numeric:
        return IntDistribution(axis.values[0], axis.values[-1])
    return CategoricalDistribution(axis.values)


def param_name(axis: Axis) -> str:
    return f"{axis.name}:log2" if axis.log2 else axis.name


def check_identity(study: optuna.study.Study, spec: ExploreSpec) -> bool:
    """Whether the study was there already (a resume); a name held for another exploration is refused."""
    import json

    identity = json.dumps(spec.identity(), sort_keys=True, default=str)
    held = study.user_attrs.get("identity")
    if held is None:
        study.set_user_attr("identity", identity)
        return bool(study.trials)
    if held != identity:
        raise ConfigError(
            "name",
            f"{spec.study_name} names another exploration (other space, objectives or durations): "
            "choose another --name",
        )
    return True
