"""The real evaluate function of an exploration: each point a recorded run through an Executor.

Every evaluated point is a normal run in the results store, tagged ``explore:<study>`` and
``rung:<k>`` (its run length), so `flowrate runs`, compare, pareto and report work on it. The
Optuna study lives beside the store, in ``<store stem>.explore.db``: Optuna manages its own
tables and migrations (SQLAlchemy, alembic), which have no place in the store's versioned schema
(flowrate.results.store_schema), and a store stays readable by a flowrate without Optuna.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from flowrate.campaigns.child import OOM as CHILD_OOM
from flowrate.campaigns.child import ChildOutcome
from flowrate.campaigns.executor import Executor
from flowrate.campaigns.explore_fidelity import loop_steps
from flowrate.campaigns.explore_plan import DONE, FAILED, OOM, Evaluation, ExploreSpec, Outcome
from flowrate.config import RunConfig
from flowrate.results.metrics import METRICS
from flowrate.results.schema import Result
from flowrate.results.store import Store


def study_storage(store: Path) -> str:
    """The Optuna storage URL of a store's explorations: an SQLite file beside it."""
    return f"sqlite:///{store.with_name(store.stem + '.explore.db').resolve()}"


def figures(result: Result, names: Sequence[str]) -> tuple[dict[str, float], dict[str, float]]:
    """A run's figures for ``names`` and their standard errors (from the per-interval values,
    where the metric has them); a figure the run did not record is left out."""
    values, noise = {}, {}
    for name in names:
        metric = METRICS[name]
        value = metric.value(result)
        if value is None:
            continue
        values[name] = float(value)
        samples = metric.interval_values(result)
        if len(samples) >= 2:
            noise[name] = statistics.stdev(samples) / len(samples) ** 0.5
    return values, noise


def run_evaluator(
    spec: ExploreSpec,
    executor: Executor,
    store: Store,
    tags: Sequence[str] = (),
    clock: Callable[[], float] = time.monotonic,
) -> Callable[[Sequence[Evaluation]], list[Outcome]]:
    """Evaluate a batch by running its points through ``executor``, recording each done run."""
    names = spec.metrics

    def evaluate(batch: Sequence[Evaluation]) -> list[Outcome]:
        configs = [rung_config(spec, e) for e in batch]
        began = clock()
        children = executor.run_many(configs)
        share = (clock() - began) / max(len(batch), 1)  # each point's part of the batch's wall time
        return [
            _outcome(child, evaluation, names, store, [*tags, f"explore:{spec.study_name}"], share)
            for evaluation, child in zip(batch, children, strict=True)
        ]

    return evaluate


def rung_config(spec: ExploreSpec, evaluation: Evaluation) -> RunConfig:
    """The run of one evaluation: the point at its rung's duration, a short rung with
    proportionally fewer preheat and minimum timed steps (explore_fidelity.loop_steps)."""
    config = spec.space.config_for(evaluation.params, evaluation.duration_s)
    share = evaluation.duration_s / spec.fidelity.durations[-1]
    if share >= 1:
        return config
    preheat, min_steps = loop_steps(share, config.preheat_steps, config.min_steps)
    return config.replace(preheat_steps=preheat, min_steps=min_steps)


def _outcome(
    child: ChildOutcome,
    evaluation: Evaluation,
    names: Sequence[str],
    store: Store,
    tags: list[str],
    cost: float,
) -> Outcome:
    if child.result is None:
        status = OOM if child.failure == CHILD_OOM else FAILED
        return Outcome(status, cost_s=cost, reason=child.message or "it failed without a message")
    store.add(child.result, [*tags, f"rung:{evaluation.rung}"])
    values, noise = figures(child.result, names)
    missing = [n for n in names if n not in values]
    if missing:
        reason = f"the run records no {', '.join(METRICS[n].label for n in missing)}"
        return Outcome(FAILED, cost_s=cost, run_id=child.result.run_id, reason=reason)
    return Outcome(DONE, values, noise, cost, child.result.run_id)
