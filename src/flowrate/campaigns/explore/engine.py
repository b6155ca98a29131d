"""`flowrate explore`'s engine: a multi-objective Optuna study over a search space, with rungs.

Optuna proposes configurations (ask), a batch of up to ``max_parallel`` evaluations runs at once
(an Executor's batch, or a recorded table's lookups), and each outcome is told back (tell).
Every configuration is first measured at the lowest rung (flowrate.campaigns.rungs.ladder);
those that could still be on the frontier go on to longer runs: in the same process, decided as
the run reaches each rung (a Continuation), or, where a run cannot read its figures at a rung,
promoted to a run of their own before new ones are asked for. The study's trials are the
configurations at the lowest rung (what the sampler learns from); measurements at higher rungs
are trials of a second study, ``<name>/rungs``. A new study starts from a space-filling design
(plan.space_filling), then the sampler proposes.

Which sampler, and why: flowrate.campaigns.explore.study.

Why it resumes: the study lives in an SQLite file beside the results store (session.py), its
name a hash of the space, objectives, constraints and rungs, and every outcome is told as soon as
it is known. The same exploration started again loads the study: recorded evaluations are not
run again, and a configuration whose run was cut off by a kill is proposed again first. One
session of a study runs at a time (session.py): a trial left running is a killed one.

Out-of-memory points are infeasible (a violated constraint), not errors; points Optuna proposes a
second time are answered from the first measurement without running.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from flowrate.campaigns.explore.objectives import violations
from flowrate.campaigns.explore.plan import (
    DONE,
    OOM,
    Budget,
    Evaluate,
    Evaluated,
    Evaluation,
    ExploreSpec,
    Outcome,
    check_budget,
    default_initial,
    space_filling,
)
from flowrate.campaigns.explore.proposals import frontier_neighbour, polishing, unmeasured
from flowrate.campaigns.explore.study import check_identity, choose_sampler, distribution, param_name
from flowrate.campaigns.rungs.ladder import Continuation, Measured, first_front
from flowrate.results.store import point_key

if TYPE_CHECKING:
    import optuna

_DUPLICATES = 10  # proposals in a row already measured before one is drawn from the unmeasured
# Points stopped at a rung are judged for promotion once this many times the initial design is
# measured at the lowest rung (Exploration._judged): waiting lets rivals be measured first, and in
# the replays a longer wait did no better (benchmarks/explore_efficiency.py; benchmarks/notes/,
# "points stopped at their rung judged later").
JUDGED_AFTER = 2


class ExploreListener(Protocol):
    def begin(self, study: str, sampler: str, recorded: int, resumed: bool) -> None: ...

    def recorded(self, evaluated: Evaluated, runs: int, seconds: float) -> None: ...


class _Silent:
    def begin(self, study: str, sampler: str, recorded: int, resumed: bool) -> None:
        pass

    def recorded(self, evaluated: Evaluated, runs: int, seconds: float) -> None:
        pass


@dataclass
class ExploreOutcome:
    study: str
    sampler: str
    evaluations: list[Evaluated]
    frontier: list[Evaluated]  # the full-length non-dominated points, best first on the first objective
    runs: int
    seconds: float
    exhausted: bool = False  # every point of the space was measured before the budget ran out


class Exploration:
    """One exploration: its studies loaded (or created), run until the budget is spent."""

    def __init__(
        self,
        spec: ExploreSpec,
        evaluate: Evaluate,
        *,
        budget: Budget,
        seed: int = 0,
        initial: int | None = None,
        storage: str | optuna.storages.BaseStorage | None = None,  # a URL or an opened storage;
        # None keeps the study in memory
        max_parallel: int = 1,
        sampler: str = "auto",
        listener: ExploreListener | None = None,
    ) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.spec, self.evaluate, self.budget = spec, evaluate, budget
        self.initial = default_initial(spec.space) if initial is None else initial
        check_budget(budget, self.initial)
        self.max_parallel = max(1, max_parallel)
        self.listener = listener or _Silent()
        self.sampler = choose_sampler(spec.space, budget, self.initial, seed, sampler)
        self.polish = sampler != "random"  # random search stays the plain baseline
        self.random = random.Random(seed)
        self.axes = {param_name(a): a for a in spec.space.axes}
        self.distributions = {name: distribution(a) for name, a in self.axes.items()}
        directions = [
            optuna.study.StudyDirection.MAXIMIZE if o.maximize else optuna.study.StudyDirection.MINIMIZE
            for o in spec.objectives
        ]
        name = spec.study_name
        self.study = optuna.create_study(
            study_name=name, storage=storage, directions=directions, sampler=self.sampler, load_if_exists=True
        )
        self.rungs = optuna.create_study(
            study_name=f"{name}/rungs", storage=storage, directions=directions, load_if_exists=True
        )
        self.resumed = check_identity(self.study, spec)
        self.done: list[dict[str, Evaluated]] = [{} for _ in spec.fidelity.durations]
        self._load()
        if not self.study.trials and sampler != "random":  # a new study: a space-filling start
            for params in space_filling(spec.space, self.initial, self.random):
                self.study.enqueue_trial(self._encode(params))

    # --- state --------------------------------------------------------------------------------

    def _load(self) -> None:
        """What earlier sessions measured; a trial a kill left running is proposed again first."""
        import optuna

        for trial in self.study.get_trials(deepcopy=False):
            if trial.state == optuna.trial.TrialState.RUNNING:
                self.study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
                self.study.enqueue_trial(trial.params)  # skip_if_exists would see the failed trial
            elif "status" in trial.user_attrs and "duplicate_of" not in trial.user_attrs:
                self._remember(self._evaluated(trial, earlier=True))
        for trial in self.rungs.get_trials(deepcopy=False):
            self._remember(self._evaluated(trial, earlier=True))

    def _evaluated(self, trial: optuna.trial.FrozenTrial, earlier: bool = False) -> Evaluated:
        params = self._decode(trial.params)
        rung = int(trial.user_attrs.get("rung", 0))
        outcome = Outcome.from_attrs(trial.user_attrs)
        found = tuple(trial.user_attrs.get("constraints", [0.0])[1:])
        continued = bool(trial.user_attrs.get("continued", False))
        duration = self.spec.fidelity.durations[rung]
        return Evaluated(point_key(params), params, rung, duration, outcome, found, earlier, continued)

    def _remember(self, evaluated: Evaluated) -> None:
        self.done[evaluated.rung][evaluated.key] = evaluated

    @property
    def evaluations(self) -> list[Evaluated]:
        return [e for rung in self.done for e in rung.values()]

    def spent(self) -> tuple[int, float]:
        """Runs made (a run that went on through rungs counts once) and the seconds they took,
        over every session."""
        evaluations = self.evaluations
        return sum(not e.continued for e in evaluations), sum(e.outcome.cost_s for e in evaluations)

    def _decode(self, raw: dict[str, Any]) -> dict[str, Any]:
        params = {}
        for name, axis in self.axes.items():
            value = raw[name]
            params[axis.name] = axis.values[value] if axis.log2 else value
        return params

    def _encode(self, params: dict[str, Any]) -> dict[str, Any]:
        return {n: a.values.index(params[a.name]) if a.log2 else params[a.name] for n, a in self.axes.items()}

    # --- the loop -----------------------------------------------------------------------------

    def run(self) -> ExploreOutcome:
        """Measure until the budget is spent or every point of the space is measured."""
        self.listener.begin(
            self.spec.study_name, type(self.sampler).__name__, len(self.evaluations), self.resumed
        )
        exhausted = False
        while True:
            room = min(self.budget.room(*self.spent()), self.max_parallel)
            if room == 0:
                break
            batch: list[tuple[Evaluation, optuna.trial.Trial | None]] = [
                (e, None) for e in self._promotions()[:room]
            ]
            pending = {point_key(e.params) for e, _ in batch}
            while len(batch) < room:
                proposal = self._ask(pending)
                if proposal is None:
                    break
                trial, params = proposal
                pending.add(point_key(params))
                lowest = self.spec.fidelity.durations[0]
                batch.append((Evaluation(params, lowest, 0, self._continuation(0, params)), trial))
            if not batch:  # nothing new to ask: the points waiting to be judged go on now
                batch = [(e, None) for e in self._promotions(waited=True)[:room]]
            if not batch:
                exhausted = True
                break
            outcomes = self.evaluate([e for e, _ in batch])
            for (evaluation, told), outcome in zip(batch, outcomes, strict=True):
                self._record(evaluation, outcome, told)
        runs, seconds = self.spent()
        return ExploreOutcome(
            self.spec.study_name,
            type(self.sampler).__name__,
            self.evaluations,
            self.frontier(),
            runs,
            seconds,
            exhausted,
        )

    def _ask(self, pending: set[str]) -> tuple[optuna.trial.Trial, dict[str, Any]] | None:
        """A new point to measure at the lowest rung, or None when every point is measured.

        After the initial design, every second new point is the frontier's nearest unmeasured
        neighbour (flowrate.campaigns.explore.proposals says why). A point already measured is
        answered from its measurement (the sampler learns it again, nothing runs); after a run of
        those, an unmeasured point is drawn at random instead.
        """
        import optuna

        measured = self.done[0]
        taken = measured.keys() | pending
        if self.polish and polishing(len(taken), self.initial):
            front = sorted(first_front(self._standing(0), self.spec.fidelity.z), key=lambda m: -m.gains[0])
            near = frontier_neighbour(self.spec.space, [measured[m.key].params for m in front], taken)
            if near is not None:
                self.study.enqueue_trial(self._encode(near))
        for attempt in range(_DUPLICATES + 1):
            if attempt == _DUPLICATES:
                fresh = unmeasured(self.spec.space, taken, self.random)
                if fresh is None:
                    return None
                self.study.enqueue_trial(self._encode(fresh))
            trial = self.study.ask(self.distributions)
            params = self._decode(trial.params)
            key = point_key(params)
            earlier = measured.get(key)
            if earlier is None and key not in pending:
                return trial, params
            if earlier is None:  # proposed twice in one batch: nothing to answer with yet
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                continue
            trial.set_user_attr("duplicate_of", key)  # costs nothing: not a run of the budget
            self._tell(trial, earlier.outcome, earlier.violations)
        return None

    def _promotions(self, waited: bool = False) -> list[Evaluation]:
        """Points to measure at the next rung: those nothing at their rung beats beyond noise, the
        highest rungs first (their full-length runs complete the frontier), once they can be
        judged (_judged; ``waited``: nothing else is left to measure first)."""
        if len(self.done[0]) < self.initial:
            return []
        promoted = self._front_runners()
        return promoted if waited or self._judged(len(promoted)) else []

    def _judged(self, waiting: int) -> bool:
        """Whether points stopped at their rung are judged now. They wait until JUDGED_AFTER times
        the initial design is measured at the lowest rung: judged against the design alone, most
        of a small design is on its own frontier, and each of them would run to full length
        before a later point showed it beaten. They wait no longer than the budget allows: when
        what is left of it would not run them all at full length, they go on at once."""
        if len(self.done[0]) >= JUDGED_AFTER * self.initial:
            return True
        runs, seconds = self.spent()
        if self.budget.runs is not None:
            return self.budget.runs - runs <= waiting
        if self.budget.seconds is not None:
            return self.budget.seconds - seconds <= waiting * self.spec.fidelity.durations[-1]
        return False

    def _front_runners(self) -> list[Evaluation]:
        """The points nothing at their rung beats beyond noise and not yet measured at the next,
        highest rungs first."""
        promoted = []
        for rung in reversed(range(self.spec.fidelity.top)):
            front = {m.key for m in first_front(self._standing(rung), self.spec.fidelity.z)}
            for evaluated in self.done[rung].values():
                if evaluated.key in front and evaluated.key not in self.done[rung + 1]:
                    params, up = evaluated.params, rung + 1
                    then = self._continuation(up, params)
                    promoted.append(Evaluation(params, self.spec.fidelity.durations[up], up, then))
        return promoted

    def _standing(self, rung: int) -> list[Measured]:
        """The feasible configurations measured at ``rung``, each as its longest run measured it,
        so one lucky short draw stops no rival once a longer run of it measured what it does (a
        short run's draw far from its mean could otherwise keep the whole frontier from full
        length: benchmarks/notes/, "judges a rival by its longest run")."""
        latest = dict(self.done[rung])
        for higher in self.done[rung + 1 :]:
            latest.update((key, e) for key, e in higher.items() if key in latest)
        goals = self.spec.objectives
        return [Measured(k, e.gains(goals), e.noise(goals)) for k, e in latest.items() if e.feasible]

    def _continuation(self, rung: int, params: dict[str, Any]) -> Continuation | None:
        """How a run of ``params`` starting at ``rung`` goes on in its own process: against
        everything measured so far at each rung it passes (None: it stops at its rung). The
        initial design's points stop at their rung: with few rivals measured, nearly every run
        would go on to full length (benchmarks/notes/, "going on in one process from the very
        first configuration"); those of them nothing beats are promoted once they can be judged
        (_judged)."""
        fidelity = self.spec.fidelity
        if not self.spec.continues or rung >= fidelity.top or len(self.done[0]) < self.initial:
            return None  # in the initial design nothing is measured yet to judge a run against
        key = point_key(params)
        rivals = tuple(tuple(m for m in self._standing(r) if m.key != key) for r in range(rung, fidelity.top))
        named = tuple((o.name, o.maximize) for o in self.spec.objectives)
        return Continuation(fidelity.durations[rung:], rivals, named, fidelity.z)

    def _record(
        self,
        evaluation: Evaluation,
        outcome: Outcome,
        trial: optuna.trial.Trial | None,
        continued: bool = False,
    ) -> None:
        """Record an outcome (told to the study at the lowest rung, added to the rungs' study
        above), then those its run went on to."""
        import optuna

        found: tuple[float, ...] = ()
        if outcome.status == DONE:
            found = tuple(violations(self.spec.constraints, outcome.values))
        evaluated = Evaluated(
            point_key(evaluation.params),
            evaluation.params,
            evaluation.rung,
            evaluation.duration_s,
            outcome,
            found,
            continued=continued,
        )
        if trial is not None:
            self._tell(trial, outcome, found)
        else:
            attrs = {
                **outcome.to_attrs(),
                "rung": evaluation.rung,
                "constraints": self._constraint_list(outcome, found),
                "continued": continued,
            }
            done = outcome.status == DONE
            self.rungs.add_trial(
                optuna.trial.create_trial(
                    params=self._encode(evaluation.params),
                    distributions=self.distributions,
                    values=self._values(outcome) if done else None,
                    state=optuna.trial.TrialState.COMPLETE if done else optuna.trial.TrialState.FAIL,
                    user_attrs=attrs,
                )
            )
        self._remember(evaluated)
        self.listener.recorded(evaluated, *self.spent())
        for rung, further in enumerate(outcome.higher, start=evaluation.rung + 1):
            above = Evaluation(evaluation.params, self.spec.fidelity.durations[rung], rung)
            self._record(above, further, None, continued=True)

    def _tell(self, trial: optuna.trial.Trial, outcome: Outcome, found: tuple[float, ...]) -> None:
        """Tell the sampler an outcome: a failure as failed, out of memory as infeasible."""
        import optuna

        for key, value in {
            **outcome.to_attrs(),
            "rung": 0,
            "constraints": self._constraint_list(outcome, found),
        }.items():
            trial.set_user_attr(key, value)
        if outcome.status in (DONE, OOM):
            self.study.tell(trial, self._values(outcome))
        else:
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)

    def _constraint_list(self, outcome: Outcome, found: tuple[float, ...]) -> list[float]:
        """Optuna's constraint values (≤ 0 holds): out of memory first, then each constraint's."""
        if outcome.status == OOM:
            return [1.0] + [0.0] * len(self.spec.constraints)
        return [-1.0, *found]

    def _values(self, outcome: Outcome) -> list[float]:
        """The objectives' values; an out-of-memory point (infeasible) gets the worst measured."""
        if outcome.status == DONE:
            return [float(outcome.values[o.name]) for o in self.spec.objectives]
        measured = [e for e in self.done[0].values() if e.outcome.status == DONE]
        worst = []
        for o in self.spec.objectives:
            seen = [e.outcome.values[o.name] for e in measured]
            worst.append((min(seen) if o.maximize else max(seen)) if seen else 0.0)
        return worst

    def frontier(self) -> list[Evaluated]:
        """The non-dominated feasible points measured at full length (1% ties, as `flowrate pareto`)."""
        objectives = self.spec.objectives
        top = [e for e in self.done[self.spec.fidelity.top].values() if e.feasible]
        front = {
            m.key
            for m in first_front(
                [Measured(e.key, e.gains(objectives), (0.0,) * len(objectives)) for e in top]
            )
        }
        kept = [e for e in top if e.key in front]
        return sorted(kept, key=lambda e: -e.gains(objectives)[0])


def explore(
    spec: ExploreSpec,
    evaluate: Evaluate,
    *,
    budget: Budget,
    seed: int = 0,
    initial: int | None = None,
    storage: str | optuna.storages.BaseStorage | None = None,
    max_parallel: int = 1,
    sampler: str = "auto",
    listener: ExploreListener | None = None,
) -> ExploreOutcome:
    """Run (or resume) the exploration ``spec`` until ``budget`` is spent; see Exploration."""
    return Exploration(
        spec,
        evaluate,
        budget=budget,
        seed=seed,
        initial=initial,
        storage=storage,
        max_parallel=max_parallel,
        sampler=sampler,
        listener=listener,
    ).run()
