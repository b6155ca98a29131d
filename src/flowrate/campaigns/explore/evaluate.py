"""The real evaluate function of an exploration: each point a recorded run through an Executor.

Every evaluated point is a normal run in the results store, tagged ``explore:<study>`` and
``rung:<k>`` (its run length), so `flowrate runs`, compare, pareto and report work on it. The
Optuna study lives beside the store, in ``<store stem>.explore.db``: Optuna manages its own
tables and migrations (SQLAlchemy, alembic), which have no place in the store's versioned schema
(flowrate.results.store_schema), and a store stays readable by a flowrate without Optuna. One
session per study at a time: flowrate.campaigns.explore.session.

Fidelity as an objective (or a constraint): ``final_loss``, the loss a `flowrate check` of the
configuration reaches, is not in a timed run. A configuration's check (CHECK_STEPS steps on the
problem's learnable task, no preheat, as `flowrate check` runs by default) runs beside its first
evaluation, in the same batch, through the same executor; it is recorded tagged ``check`` and its
loss is reused at the configuration's longer rungs (a check's length does not depend on the rung).
A loss has no per-interval spread: its noise is left at 0 (the 1% tie of the promotion rule).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from collections.abc import Callable, Sequence

from flowrate.campaigns.explore.plan import DONE, FAILED, OOM, Evaluation, ExploreSpec, Outcome
from flowrate.campaigns.process.child import OOM as CHILD_OOM
from flowrate.campaigns.process.child import ChildOutcome
from flowrate.campaigns.process.executor import Executor
from flowrate.campaigns.process.job import Job, JobKind
from flowrate.campaigns.rungs.ladder import loop_steps
from flowrate.campaigns.rungs.watch import figures, plan_for
from flowrate.config import CHECK_STEPS, RunConfig
from flowrate.results.metrics import METRICS
from flowrate.results.schema import Result
from flowrate.results.store import Store

FIDELITY = "final_loss"  # the metric a check gives, not a timed run (module docstring)


def run_evaluator(
    spec: ExploreSpec,
    executor: Executor,
    store: Store,
    tags: Sequence[str] = (),
    clock: Callable[[], float] = time.monotonic,
) -> Callable[[Sequence[Evaluation]], list[Outcome]]:
    """Evaluate a batch by running its points through ``executor``, recording each done run
    (and each configuration's check, where the fidelity metric is asked for)."""
    names = spec.metrics
    run_tags = [*tags, f"explore:{spec.study_name}"]
    losses: dict[str, Checked] = {}  # a configuration's check, by its params

    def evaluate(batch: Sequence[Evaluation]) -> list[Outcome]:
        jobs = [rung_config(spec, e) for e in batch]
        checks = {}
        if FIDELITY in names:
            checks = {_key(e): _check_job(j) for e, j in zip(batch, jobs, strict=True)}
            checks = {key: check for key, check in checks.items() if key not in losses}
        began = clock()
        children = executor.run_many([*jobs, *checks.values()])
        share = (clock() - began) / max(len(batch), 1)  # each point's part of the batch's wall time
        for key, child in zip(checks, children[len(jobs) :], strict=True):
            losses[key] = _checked(child, store, [*run_tags, "check"])
        return [
            _outcome(child, evaluation, names, store, run_tags, share, losses.get(_key(evaluation)))
            for evaluation, child in zip(batch, children[: len(jobs)], strict=True)
        ]

    return evaluate


def check_config(config: RunConfig) -> RunConfig:
    """A point's fidelity check (run as a JobKind.CHECK job): its configuration trained
    CHECK_STEPS steps, no preheat."""
    return config.replace(steps=CHECK_STEPS, preheat_steps=0)


def _check_job(job: Job) -> Job:
    assert isinstance(job.config, RunConfig)  # an exploration runs `flowrate run` configs only
    return Job(check_config(job.config), JobKind.CHECK)


def _key(evaluation: Evaluation) -> str:
    return json.dumps(evaluation.params, sort_keys=True, default=str)


Checked = tuple[float | None, str]  # a check's loss, or None and why there is none


def _checked(child: ChildOutcome, store: Store, tags: list[str]) -> Checked:
    if child.result is None:
        return None, child.message or "it failed without a message"
    store.add(child.result, tags)
    loss = METRICS[FIDELITY].value(child.result)
    return (float(loss), "") if loss is not None else (None, "it recorded no loss")


def rung_config(spec: ExploreSpec, evaluation: Evaluation) -> Job:
    """The run of one evaluation: the point at its rung's duration, a short rung with
    proportionally fewer preheat and minimum timed steps (flowrate.campaigns.rungs.ladder.loop_steps);
    one that goes on (``then``) at full length, measured at each rung's duration and minimum steps
    on its way."""
    full = spec.fidelity.durations[-1]
    config = spec.space.config_for(evaluation.params, evaluation.duration_s)
    if evaluation.then is not None:
        config = config.replace(duration_s=full)
        shares = [d / full for d in evaluation.then.durations[:-1]]
        steps = [loop_steps(share, config.preheat_steps, config.min_steps)[1] for share in shares]
        plan = plan_for(evaluation.then, steps)
        return Job(config, JobKind.CONTINUE, json.dumps(plan))
    share = evaluation.duration_s / full
    if share >= 1:
        return Job(config)
    preheat, min_steps = loop_steps(share, config.preheat_steps, config.min_steps)
    return Job(config.replace(preheat_steps=preheat, min_steps=min_steps))


def _outcome(
    child: ChildOutcome,
    evaluation: Evaluation,
    names: Sequence[str],
    store: Store,
    tags: list[str],
    cost: float,
    checked: Checked | None = None,
) -> Outcome:
    if child.result is None:
        status = OOM if child.failure == CHILD_OOM else FAILED
        return Outcome(status, cost_s=cost, reason=child.message or "it failed without a message")
    results = [*child.lower, child.result]  # one per rung reached, from the evaluation's own
    costs = _rung_costs(results, cost)
    outcomes = [
        _rung_outcome(result, evaluation.rung + i, names, store, tags, spent, checked)
        for i, (result, spent) in enumerate(zip(results, costs, strict=True))
    ]
    return dataclasses.replace(outcomes[0], higher=tuple(outcomes[1:]))


def _rung_costs(results: Sequence[Result], cost: float) -> list[float]:
    """What each rung of a run cost: the first, the run's cost less the timed seconds the
    later rungs added; each later one, those it added."""
    ends = [r.intervals[-1].elapsed_s if r.intervals else 0.0 for r in results]
    added = [b - a for a, b in itertools.pairwise(ends)]
    return [cost - sum(added), *added]


def _rung_outcome(
    result: Result,
    rung: int,
    names: Sequence[str],
    store: Store,
    tags: list[str],
    cost: float,
    checked: Checked | None,
) -> Outcome:
    store.add(result, [*tags, f"rung:{rung}"])
    values, noise = figures(result, [n for n in names if n != FIDELITY])
    if checked is not None:
        loss, why = checked
        if loss is None:
            reason = f"its check failed: {why}"
            return Outcome(FAILED, cost_s=cost, run_id=result.run_id, reason=reason)
        values[FIDELITY] = loss
    missing = [n for n in names if n not in values]
    if missing:
        reason = f"the run records no {', '.join(METRICS[n].label for n in missing)}"
        return Outcome(FAILED, cost_s=cost, run_id=result.run_id, reason=reason)
    return Outcome(DONE, values, noise, cost, result.run_id)
