"""The oracle view: for each value of one axis, the best configuration of all the others.

An oracle would give, for each value of a parameter of interest, the optimal set of all other
parameters; the recorded runs approximate it. Runs are first pooled into configurations:
runs of one problem whose every option (run options, the problem's shape, batch size, device)
matches are repeats of one configuration, whatever the procedure that measured them (duration,
preheat, seed: how a run measured, not what). Then, per problem and per value of the axis, the
configuration best on the first objective (and those within its noise there), and the
configurations' frontier over all the objectives.

Each figure carries its uncertainty, a 95% confidence interval half-width:
- between-run, where a configuration has 3 runs or more: the Student-t interval of their mean —
  what another run would vary by, which is what a choice between configurations must beat;
- pooled, where it has fewer and some of the problem's configurations have repeats: their
  between-run spread relative to the mean, pooled (a t interval on its degrees of freedom). Two
  runs alone give a t multiplier of 12.7: an interval too wide to rank anything by;
- between-run on its two runs where no other configuration has repeats;
- within-run, where it has one run and nothing to pool: the t interval of the run's interval
  values (metrics measured per interval; tokens/s takes samples/s's relative width, being
  proportional to it). It understates the between-run spread (a run's offset is not in it), and
  says so;
- none, for a figure with neither (peak memory of a single run): only the 1% resolution below.

Noise-aware dominance: A dominates B when A is significantly better on some objective and
significantly worse on none. A difference is significant when it exceeds both the 1% resolution
of pareto.TIE and the 95% half-width of the difference, sqrt(hA² + hB²) — the interval of A − B
for independent estimates, a two-sided z-rule at 5%. The sum hA + hB (intervals not overlapping)
would ask for more than 5%: two equal intervals that overlap by up to 0.59 of a half-width still
differ at 5% (2h − √2·h), so the sum would keep beaten points on the frontier.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from scipy.special import stdtrit  # Student-t quantile, as measure.stats uses it

from flowrate.analysis.grouping import by_problem, problem_of
from flowrate.analysis.pareto import TIE, Objective, choose_objectives, measured
from flowrate.errors import FlowrateError
from flowrate.measure.stats import summarize
from flowrate.results.codec import encode
from flowrate.results.identity import workload
from flowrate.results.metrics import get_metric
from flowrate.results.store import StoredRun

# how a run measured, not what it measured: runs differing only here are repeats of one configuration
PROCEDURE = frozenset(
    {
        "problem",
        "size",  # in the problem's name: a configuration is ranked only within its problem
        "problem_options",  # the problem's settings stand for them
        "batch_size",  # the batch size run, below (the config may say "auto")
        "max_batch_size",
        "device",  # "auto": the device's name stands for it
        "seed",
        "preheat_steps",
        "steps",
        "min_steps",
        "duration_s",
        "sample_every",
        "target_interval_s",
        "smoothing",
        "checkpoint_dir",
        "keep_checkpoints",
        "dist_timeout_s",
        "measure_peak",
        "profile_dir",
        "price_per_hour",
        "energy_price_per_kwh",
        "prices",
        "to_solution",
    }
)
PROPORTIONAL = {"tokens_per_sec": "samples_per_sec"}  # same spread: a constant times the other
OWN_SPREAD_RUNS = 3  # fewer runs say too little of their own spread: the problem's pooled one stands in


@dataclass(frozen=True)
class Estimate:
    value: float
    half_width: float  # of its 95% confidence interval; 0 where no spread was measured
    source: str  # "between-run", "pooled", "within-run" or "none"


@dataclass(frozen=True)
class ConfigPoint:
    """A configuration: its options, its runs, and one estimate per objective."""

    problem: str
    settings: dict[str, Any]
    runs: tuple[StoredRun, ...]
    estimates: tuple[Estimate, ...]

    @property
    def label(self) -> str:
        return self.runs[0].run_id if len(self.runs) == 1 else f"{self.runs[0].run_id} +{len(self.runs) - 1}"


@dataclass(frozen=True)
class AxisSlice:
    """One problem's configurations at one value of the axis: the best on the first objective, those
    within its noise there (tied), the frontier over every objective (best first on the first) and
    the dominated. The best can itself be dominated: by a configuration as fast within noise and
    significantly smaller."""

    problem: str
    value: Any
    best: ConfigPoint
    tied: list[ConfigPoint]
    front: list[ConfigPoint]
    dominated: list[ConfigPoint]


@dataclass(frozen=True)
class OracleView:
    axis: str
    objectives: list[Objective]
    varying: list[str]  # the options that vary among the ranked runs, the axis among them
    slices: list[AxisSlice]
    excluded: list[tuple[StoredRun, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def settings_of(run: StoredRun) -> dict[str, Any]:
    """Every option of a run that makes its configuration: run options, batch size, the problem's
    shape, the device's name and the kind's workload (flowrate.results.identity), each a hashable
    value."""
    result = run.result
    found = {k: v for k, v in encode(result.config).items() if k not in PROCEDURE}
    found.update({k: v for k, v in result.problem.settings.items() if k not in found})
    found["batch_size"] = result.batch_size
    found["device_name"] = run.device_name
    found.update(workload(result))  # a serving run's offered load, a generation's lengths
    return {k: _hashable(v) for k, v in sorted(found.items())}


def varying_options(runs: Sequence[StoredRun]) -> list[str]:
    """The options whose value differs among the runs of one problem: the axes an oracle view can
    take (a shape that differs only between problems, such as a size's layers, is not one)."""
    found: set[str] = set()
    for _, group in by_problem(runs):
        rows = [settings_of(r) for r in group]
        found |= {k for s in rows for k in s if _varies(k, rows)}
    return sorted(found)


def oracle_view(
    runs: Sequence[StoredRun], axis: str, objectives: Sequence[Objective] | None = None
) -> OracleView:
    """Per problem and value of ``axis``: the best configuration on the first of ``objectives``
    (pareto's defaults when None), those tied with it within noise, and the noise-aware frontier."""
    chosen, notes = choose_objectives(runs, objectives)
    _, candidates, excluded = measured(runs, chosen)
    settings = {r.run_id: settings_of(r) for r in candidates}
    axis = _check_axis(axis, candidates)
    varying = varying_options(candidates)

    configurations: dict[tuple[str, str], list[StoredRun]] = {}
    for run in sorted(candidates, key=lambda r: (r.created_at, r.run_id)):  # its first run names it
        key = json.dumps(settings[run.run_id], sort_keys=True, default=str)
        configurations.setdefault((problem_of(run), key), []).append(run)
    pooled = {
        (problem, o.name): pooled_spread([g for (p, _), g in configurations.items() if p == problem], o)
        for problem in {p for p, _ in configurations}
        for o in chosen
    }
    points = [
        ConfigPoint(
            problem,
            settings[group[0].run_id],
            tuple(group),
            tuple(estimate(group, o, pooled[problem, o.name]) for o in chosen),
        )
        for (problem, _), group in configurations.items()
    ]
    by_slice: dict[tuple[str, Any], list[ConfigPoint]] = {}
    for point in points:
        by_slice.setdefault((point.problem, point.settings.get(axis)), []).append(point)
    slices = [
        _slice(problem, value, group, chosen)
        for (problem, value), group in sorted(by_slice.items(), key=lambda item: _order(*item[0]))
    ]
    for (problem, name), spread in sorted(pooled.items()):
        if spread is not None and name == chosen[0].name:
            notes.append(
                f"{problem}: {get_metric(name).label} varies by {spread.cv:.1%} between runs of a "
                f"configuration (pooled over its repeats, {spread.df} degrees of freedom); configurations "
                f"with fewer than {OWN_SPREAD_RUNS} runs are given that spread"
            )
    if any(p.estimates[0].source == "within-run" for p in points):
        notes.append(
            "configurations with one run carry their run's own interval spread (within-run), which "
            "understates what another run would vary by: repeat them (--repeat, or the sweep again)"
        )
    return OracleView(axis, chosen, varying, slices, excluded, notes)


@dataclass(frozen=True)
class PooledSpread:
    cv: float  # sd between runs of one configuration relative to its mean, pooled
    df: int  # its degrees of freedom: runs less configurations, over those with repeats


def pooled_spread(groups: Sequence[Sequence[StoredRun]], objective: Objective) -> PooledSpread | None:
    """The between-run CV of ``objective`` pooled over the configurations ``groups`` that have
    repeats (each run relative to its configuration's mean), or None with fewer than 2 degrees of
    freedom. It assumes one relative spread for a problem on one machine, as noise.py does."""
    squares, df = 0.0, 0
    for runs in groups:
        values = [v for r in runs if (v := objective.metric.value(r.result)) is not None]
        mean = statistics.fmean(values) if values else 0.0
        if len(values) < 2 or mean == 0:
            continue
        squares += sum((v / mean - 1) ** 2 for v in values)
        df += len(values) - 1
    return PooledSpread(math.sqrt(squares / df), df) if df >= 2 else None


def _slice(problem: str, value: Any, group: list[ConfigPoint], objectives: Sequence[Objective]) -> AxisSlice:
    """One axis value's configurations ranked: best and tied on the first objective, the frontier."""
    maximize = [o.maximize for o in objectives]
    front = [p for p in group if not any(noise_dominates(o, p, maximize) for o in group if o is not p)]
    front.sort(key=lambda p: p.estimates[0].value, reverse=maximize[0])
    kept = {id(p) for p in front}
    ranked = sorted(group, key=lambda p: p.estimates[0].value, reverse=maximize[0])
    tied = [p for p in ranked[1:] if not significant(p.estimates[0], ranked[0].estimates[0])]
    return AxisSlice(problem, value, ranked[0], tied, front, [p for p in group if id(p) not in kept])


def estimate(runs: Sequence[StoredRun], objective: Objective, pooled: PooledSpread | None = None) -> Estimate:
    """The configuration's figure and its 95% half-width: between its runs when it has enough, else
    the pooled between-run spread, else between its two runs, else within its one run."""
    values = [objective.metric.value(r.result) for r in runs]
    known = [float(v) for v in values if v is not None]
    mean = statistics.fmean(known)
    if len(known) >= OWN_SPREAD_RUNS or (len(known) == 2 and pooled is None):
        spread = summarize(known)
        high = spread.ci95_high if spread.ci95_high is not None else spread.mean
        return Estimate(spread.mean, high - spread.mean, "between-run")
    if pooled is not None:
        half = float(stdtrit(pooled.df, 0.975)) * pooled.cv * abs(mean) / math.sqrt(len(known))
        return Estimate(mean, half, "pooled")
    name = PROPORTIONAL.get(objective.name, objective.name)
    intervals = get_metric(name).interval_values(runs[0].result)
    if len(intervals) > 1:
        spread = summarize(intervals)
        if spread.ci95_high is not None and spread.mean > 0:
            relative = (spread.ci95_high - spread.mean) / spread.mean
            return Estimate(known[0], abs(known[0]) * relative, "within-run")
    return Estimate(known[0], 0.0, "none")


def significant(a: Estimate, b: Estimate) -> bool:
    """Whether a and b differ by more than the 1% resolution and the 95% half-width of a − b."""
    difference = abs(a.value - b.value)
    return difference > TIE * max(abs(a.value), abs(b.value)) and difference > math.hypot(
        a.half_width, b.half_width
    )


def noise_dominates(a: ConfigPoint, b: ConfigPoint, maximize: Sequence[bool]) -> bool:
    """Whether a is significantly better than b on some objective and significantly worse on none."""
    better = False
    for x, y, up in zip(a.estimates, b.estimates, maximize, strict=True):
        if not significant(x, y):
            continue
        if (x.value < y.value) if up else (x.value > y.value):
            return False
        better = True
    return better


def _check_axis(axis: str, runs: Sequence[StoredRun]) -> str:
    """The axis named as the settings name it, when it varies; else one line saying which do."""
    name = axis.strip().lower().replace("-", "_")
    name = {"batch": "batch_size", "device": "device_name"}.get(name, name)
    varying = varying_options(runs)
    if name in varying:
        return name
    choices = ", ".join(varying) if varying else "none: every run has the same configuration"
    rows = [settings_of(r) for r in runs]
    if not any(name in s for s in rows):
        raise FlowrateError(f"--by {axis}: no such option in the selected runs; options that vary: {choices}")
    values = sorted({str(s.get(name)) for s in rows})
    if len(values) > 1:  # it differs between problems only: their runs are never ranked together
        raise FlowrateError(
            f"--by {axis}: {name} takes one value within each problem ({', '.join(values)}), and runs are "
            f"compared only within their problem; options that vary: {choices}"
        )
    raise FlowrateError(
        f"--by {axis}: every selected run has {name}={values[0]}; options that vary: {choices}"
    )


def _varies(key: str, rows: Any) -> bool:
    """Whether ``key`` takes more than one value; a record without it has it unset (None)."""
    return len({s.get(key) for s in rows}) > 1


def _hashable(value: Any) -> Any:
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, default=str)
    return value


def _order(problem: str, value: Any) -> tuple[str, int, float, str]:
    """Problems by name; in each, numeric axis values by size, then the others by text."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return problem, 0, float(value), ""
    return problem, 1, 0.0, str(value)
