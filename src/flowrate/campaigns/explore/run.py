"""Running one session of an exploration against a results store: the budget checked before
anything opens, the store opened and the study's session lock held (flowrate.campaigns.explore.
session), its points run through an executor and recorded (evaluate), the search itself (engine).

Printing belongs to the CLI (flowrate/cli/explore.py); the session reports through a listener.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from flowrate.campaigns.explore.engine import ExploreListener, ExploreOutcome, explore
from flowrate.campaigns.explore.evaluate import run_evaluator
from flowrate.campaigns.explore.plan import Budget, ExploreSpec, check_budget, default_initial
from flowrate.campaigns.explore.session import exclusive_session
from flowrate.campaigns.process.executor import Executor
from flowrate.results.store import Store, store_path


def run_session(
    spec: ExploreSpec,
    store: str | None,
    open_executor: Callable[[str], Executor],
    *,
    budget: Budget,
    seed: int = 0,
    initial: int | None = None,
    sampler: str = "auto",
    tags: Sequence[str] = (),
    listener: ExploreListener | None = None,
) -> ExploreOutcome:
    """Run (or resume) the exploration ``spec`` in the store at ``store`` until ``budget`` is spent,
    each point through the executor ``open_executor`` gives for the study's name. The initial
    design (default: default_initial) is checked against the budget before the store or the study
    is opened."""
    initial = initial or default_initial(spec.space)
    check_budget(budget, initial)
    with Store(store) as opened, exclusive_session(store_path(store), spec.study_name) as storage:
        runner = open_executor(spec.study_name)
        return explore(
            spec,
            run_evaluator(spec, runner, opened, tags),
            budget=budget,
            seed=seed,
            initial=initial,
            storage=storage,
            max_parallel=runner.max_parallel,
            sampler=sampler,
            listener=listener,
        )
