"""Is B faster than A, or is the difference noise? The comparison of `flowrate compare`, pure.

The process is the unit (flowrate.results.verdict says why): every run contributes one value per
metric — its median interval value, or the figure it measured once; a --repeat result one per
repeat — and the spread between runs is the noise. Intervals only describe how steady each run
was (the within-run CV). For each metric of flowrate.results.metrics.METRICS (and SERVING_METRICS
when every run on both sides is a serve-bench run) the comparison
gives each side's centre over its runs, the ratio B/A of the means with its confidence interval,
the p-value, the method and the evidence the verdict rests on ("3 runs a side, between-run CV
1.9%"). With one run a side nothing can be called unless the store knows this configuration's
noise on this machine (flowrate.results.noise, passed in as ``history``).
flowrate.cli.compare_text renders it.

A difference is called only when it is both significant (p < alpha) and large enough to matter
(|B/A − 1| ≥ the minimum effect), so a 0.2% "significant" drift does not fail a CI job.

Two sides are also checked for comparability: records of different kinds or problems (name,
size, mode, shape) or workloads (a serving run's offered load, a generation's lengths:
flowrate.results.identity) or on different hardware (device, CPU model) are a mismatch the
command refuses unless forced, and every differing field of the environment fingerprint (device, CPU, software
versions, threads) is listed as a warning.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from flowrate.measure.stats import DEFAULT_ALPHA
from flowrate.results.blocks import block_verdict
from flowrate.results.configs import SharedConfig, as_text
from flowrate.results.environment import environment_fingerprint
from flowrate.results.identity import kind_of, workload
from flowrate.results.metrics import METRICS, SERVING_METRICS, Metric
from flowrate.results.per_process import side_values
from flowrate.results.schema import Result
from flowrate.results.turns import turns_verdict
from flowrate.results.verdict import DEFAULT_MIN_EFFECT, FASTER, TESTS, Verdict, run_level_verdict
from flowrate.units import p_value

# rate figures say faster/slower; every other figure better/worse
THROUGHPUT_METRICS = frozenset({"samples_per_sec", "tokens_per_sec", "model_flops_per_sec"})

NOT_SIGNIFICANT = "not significant"
NOT_AVAILABLE = "n/a"


@dataclass(frozen=True)
class History:
    """What the store knows of this configuration's noise: the between-run CV of samples/s and
    the runs it comes from, and where earlier comparisons ran in A B B A blocks, the CV between a
    side's two runs in one block and its degrees of freedom (flowrate.results.noise.block_cv)."""

    cv: float
    runs: int
    block_cv: float | None = None
    block_df: int = 0


@dataclass(frozen=True)
class Difference:
    """One field whose value differs between two runs."""

    field: str
    a: Any
    b: Any

    def __str__(self) -> str:
        return f"{self.field}: {self.a!r} vs {self.b!r}"


@dataclass(frozen=True)
class MetricComparison:
    """One metric of A against B over one value per process. Figures are None where they cannot
    be had; ``reason`` says why.

    verdict: "faster"/"slower" (throughput) or "better"/"worse" when the difference is significant
    and at least the minimum effect; "not significant" (within noise, or below the minimum
    effect); "n/a" when no test is possible (one run a side and no history, or a side without
    the figure).
    """

    metric: str
    label: str
    unit: str
    higher_is_better: bool
    n_a: int  # runs (processes) of A with the figure
    n_b: int
    mean_a: float | None  # over the runs' values
    mean_b: float | None
    median_a: float | None
    median_b: float | None
    stdev_a: float | None  # between runs
    stdev_b: float | None
    within_cv_a: float | None  # mean CV over each run's intervals: the runs' steadiness
    within_cv_b: float | None
    ratio: float | None  # mean B / mean A
    relative: float | None  # ratio − 1
    ci_low: float | None  # the (1 − alpha) interval of the ratio
    ci_high: float | None
    p_value: float | None
    method: str | None  # the test, e.g. "t-test of the log ratio, Welch (one value per process)"
    evidence: str | None  # "3 runs a side, between-run CV 1.9%"
    noise_source: str | None  # "runs", "history" or None (no test)
    verdict: str
    reason: str  # why the verdict: the p-value and effect, or what was missing

    @property
    def significant(self) -> bool:
        return self.verdict not in (NOT_SIGNIFICANT, NOT_AVAILABLE)

    @property
    def verdict_text(self) -> str:
        """The verdict, with its reason when no difference is called: 'not significant: within
        noise (p = 0.41 ≥ 0.05)'. A called difference's p and effect have columns of their own."""
        return self.verdict if self.significant else f"{self.verdict}: {self.reason}"


@dataclass(frozen=True)
class Comparison:
    """A (the baseline) against B, metric by metric, and what makes the two hard to compare."""

    a_label: str
    b_label: str
    a_runs: list[str]
    b_runs: list[str]
    test: str
    alpha: float
    min_effect: float
    history: History | None  # the store's noise, where it was looked up
    metrics: list[MetricComparison]
    # environment fingerprint fields that differ between A's and B's first runs
    environment_differences: list[Difference]
    # problem identity (name, size, mode, shape) that differs between A's and B's first runs, then
    # between runs of one side ("size (within A)")
    problem_mismatch: list[Difference]
    # the hardware (device, CPU model) that differs between A's and B's first runs: the verdict's
    # noise is one machine's, so this is refused unless forced too
    machine_mismatch: list[Difference]
    # configuration that differs (precision, batch size, …): usually the point of the comparison
    configuration_differences: list[Difference]
    # runs within one side that differ among themselves, and other cautions, as sentences
    notes: list[str] = field(default_factory=list)

    def metric(self, name: str) -> MetricComparison | None:
        return next((m for m in self.metrics if m.metric == name), None)

    @property
    def warnings(self) -> list[str]:
        """Every caution as one line: environment differences first, then the notes."""
        lines = [f"environments differ: {d}" for d in self.environment_differences]
        lines += [f"different problems: {d}" for d in self.problem_mismatch]
        return lines + self.notes

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = _finite(asdict(self))
        data["metrics"] = [
            {**m, "significant": c.significant} for m, c in zip(data["metrics"], self.metrics, strict=True)
        ]
        for key in (
            "environment_differences",
            "problem_mismatch",
            "machine_mismatch",
            "configuration_differences",
        ):
            data[key] = [{"field": d["field"], "a": d["a"], "b": d["b"]} for d in data[key]]
        data["warnings"] = self.warnings
        return data


def compare(
    a: Sequence[Result],
    b: Sequence[Result],
    *,
    test: str = "welch",
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    labels: tuple[str, str] = ("A", "B"),
    history: History | None = None,
    blocks: bool = False,
    turns: bool = False,
) -> Comparison:
    """Compare the runs of B against the runs of A (the baseline), metric by metric.

    ``test`` is "welch" or "mannwhitney" (over the runs' values); ``alpha`` the significance level
    (the interval is the 1 − alpha one); ``min_effect`` the smallest relative difference that is
    called (0.01 = 1%); ``history`` the store's between-run noise for this configuration, used
    when a side has too few runs to show its own; ``blocks``: the runs were made in A B B A blocks,
    each side in run order, so the throughput figures are paired by block where the machine
    drifted (flowrate.results.blocks); ``turns``: run i of each side ran together, the two taking
    turns, so those figures are paired by pair (flowrate.results.turns).
    """
    if not a or not b:
        raise ValueError("each side needs at least one run")
    if test not in TESTS:
        raise ValueError(f"test must be one of {TESTS}, got {test!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie between 0 and 1, got {alpha}")
    if min_effect < 0:
        raise ValueError(f"min_effect must not be negative, got {min_effect}")
    serving = all(r.serving is not None for r in (*a, *b))
    metrics = [
        m
        for metric in [*METRICS.values(), *(SERVING_METRICS.values() if serving else ())]
        if (m := compare_metric(metric, a, b, test, alpha, min_effect, history, blocks, turns))
    ]
    mismatch = _differences(problem_identity(a[0]), problem_identity(b[0]))
    notes = _within_sides(labels, (a, b), mismatch)
    shared = sorted({r.run_id for r in a} & {r.run_id for r in b})
    if shared:
        notes.append(f"run(s) {', '.join(shared)} are on both sides")
    return Comparison(
        a_label=labels[0],
        b_label=labels[1],
        a_runs=[r.run_id for r in a],
        b_runs=[r.run_id for r in b],
        test=test,
        alpha=alpha,
        min_effect=min_effect,
        history=history,
        metrics=metrics,
        environment_differences=_differences(
            environment_fingerprint(a[0].environment), environment_fingerprint(b[0].environment)
        ),
        problem_mismatch=mismatch,
        machine_mismatch=_differences(hardware(a[0]), hardware(b[0])),
        configuration_differences=_differences(configuration(a[0]), configuration(b[0])),
        notes=notes,
    )


def _within_sides(
    labels: tuple[str, str], sides: tuple[Sequence[Result], Sequence[Result]], mismatch: list[Difference]
) -> list[str]:
    """Runs of one side that differ from that side's first run: environments as notes (returned),
    problems appended to ``mismatch`` (pooling runs of different problems means nothing either)."""
    notes = []
    for label, side in zip(labels, sides, strict=True):
        for run in side[1:]:
            for d in _differences(
                environment_fingerprint(side[0].environment), environment_fingerprint(run.environment)
            ):
                notes.append(
                    f"runs of {label} differ among themselves: {d} ({side[0].run_id} vs {run.run_id})"
                )
            for d in _differences(problem_identity(side[0]), problem_identity(run)):
                within = Difference(f"{d.field} (within {label})", d.a, d.b)
                if within not in mismatch:
                    mismatch.append(within)
    return notes


def compare_metric(
    metric: Metric,
    a: Sequence[Result],
    b: Sequence[Result],
    test: str = "welch",
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
    history: History | None = None,
    blocks: bool = False,
    turns: bool = False,
) -> MetricComparison | None:
    """One metric of B against A over one value per process; None when neither side records it.
    ``history`` (samples/s and the figures proportional to it): the store's between-run noise;
    ``blocks``: those figures are tested over A B B A blocks (flowrate.results.blocks);
    ``turns``: over pairs that took turns (flowrate.results.turns)."""
    xs, ys = side_values(metric, a), side_values(metric, b)
    if not xs and not ys:
        return None
    figures = _figures(metric, xs, ys, a, b)
    if not xs or not ys:
        missing = "A" if not xs else "B"
        return MetricComparison(**figures, verdict=NOT_AVAILABLE, reason=f"not recorded in {missing}")
    if min(xs + ys) <= 0:  # a ratio test on the log scale needs positive values
        return MetricComparison(**figures, verdict=NOT_AVAILABLE, reason="a value is zero or negative")
    # the throughput figures are proportional to samples/s: they share its between-run CV
    known = history if metric.name in THROUGHPUT_METRICS and history is not None else None
    if (blocks or turns) and metric.name in THROUGHPUT_METRICS:
        v = (turns_verdict if turns else block_verdict)(
            xs,
            ys,
            alpha=alpha,
            min_effect=min_effect,
            history_cv=known.cv if known else None,
            history_runs=known.runs if known else 0,
        )
    else:
        v = run_level_verdict(
            xs,
            ys,
            alpha=alpha,
            min_effect=min_effect,
            test=test,
            history_cv=known.cv if known else None,
            history_runs=known.runs if known else 0,
        )
    figures.update(
        ci_low=_nan_none(v.ci_low),
        ci_high=_nan_none(v.ci_high),
        p_value=v.p_value,
        method=v.method if v.p_value is not None else None,  # no test, no method
        evidence=v.evidence,
        noise_source=v.noise_source,
    )
    verdict, reason = _verdict(metric, v, alpha, min_effect)
    return MetricComparison(**figures, verdict=verdict, reason=reason)


def _figures(
    metric: Metric, xs: list[float], ys: list[float], a: Sequence[Result], b: Sequence[Result]
) -> dict[str, Any]:
    """The metric, each side's centre and spread over its processes and the ratio of the means;
    the test's figures are None until compare_metric fills them in."""
    ca, cb = _Centre.of(xs), _Centre.of(ys)
    ratio = relative = None
    if ca.mean and cb.mean is not None:
        ratio = cb.mean / ca.mean
        relative = (cb.mean - ca.mean) / abs(ca.mean)
    return {
        "metric": metric.name,
        "label": metric.label,
        "unit": metric.unit,
        "higher_is_better": metric.higher_is_better,
        "n_a": len(xs),
        "n_b": len(ys),
        "mean_a": ca.mean,
        "mean_b": cb.mean,
        "median_a": ca.median,
        "median_b": cb.median,
        "stdev_a": ca.stdev,
        "stdev_b": cb.stdev,
        "within_cv_a": _within_cv(metric, a),
        "within_cv_b": _within_cv(metric, b),
        "ratio": ratio,
        "relative": relative,
        **dict.fromkeys(("ci_low", "ci_high", "p_value", "method", "evidence", "noise_source")),
    }


def _within_cv(metric: Metric, runs: Sequence[Result]) -> float | None:
    """The mean CV of the metric over each run's intervals: how steady a run is, not the noise."""
    cvs = []
    for run in runs:
        values = metric.interval_values(run)
        if len(values) > 1 and (mean := statistics.fmean(values)):
            cvs.append(statistics.stdev(values) / abs(mean))
    return statistics.fmean(cvs) if cvs else None


def significantly_slower(comparison: Comparison, max_drop: float) -> bool | None:
    """For CI: is B's samples/s significantly slower than A's (the verdict 'slower') by more than
    ``max_drop`` (0.05 = 5%)? None when samples/s could not be tested."""
    throughput = comparison.metric("samples_per_sec")
    if throughput is None or throughput.p_value is None:
        return None
    return throughput.verdict == "slower" and -(throughput.relative or 0.0) > max_drop


def _verdict(metric: Metric, v: Verdict, alpha: float, min_effect: float) -> tuple[str, str]:
    if v.p_value is None:
        return NOT_AVAILABLE, v.evidence
    relative = v.ratio - 1
    if v.p_value >= alpha:
        return NOT_SIGNIFICANT, f"within noise (p = {p_value(v.p_value)} ≥ {alpha:g})"
    if not v.significant:
        return NOT_SIGNIFICANT, f"below the minimum effect ({relative:+.2%} is under {min_effect:.2%})"
    higher = v.direction == FASTER
    if metric.name in THROUGHPUT_METRICS:
        word = "faster" if higher else "slower"
    else:
        word = "better" if higher == metric.higher_is_better else "worse"
    return word, f"p = {p_value(v.p_value)}, {relative:+.1%}"


def _nan_none(value: float) -> float | None:
    return None if math.isnan(value) else value


@dataclass(frozen=True)
class _Centre:
    mean: float | None
    median: float | None
    stdev: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> _Centre:
        if not values:
            return cls(None, None, None)
        stdev = statistics.stdev(values) if len(values) > 1 else None
        return cls(statistics.fmean(values), statistics.median(values), stdev)


def problem_identity(result: Result) -> dict[str, Any]:
    """What must match for two records to measure the same work: the kind of record, the problem
    (name, size, mode and shape) and the kind's workload (flowrate.results.identity: a serving
    run's server and offered load, a generation's lengths)."""
    problem = result.problem
    identity = {
        "kind": str(kind_of(result)),
        "problem": problem.name or result.config.problem,
        "size": problem.size or result.config.size,
        "mode": as_text(result.config.mode),
    }
    identity.update({f"shape.{key}": value for key, value in problem.settings.items()})
    identity.update(workload(result))
    return identity


def hardware(result: Result) -> dict[str, Any]:
    """The machine's hardware as far as a comparison is concerned: device and CPU model."""
    fingerprint = environment_fingerprint(result.environment)
    return {"device_name": fingerprint["device_name"], "cpu_model": fingerprint["cpu_model"]}


def configuration(result: Result) -> dict[str, Any]:
    """The settings a comparison usually varies on purpose: precision, batch size, execution, …"""
    config: SharedConfig = result.config
    return {
        "batch_size": result.batch_size,
        "precision": as_text(config.precision),
        "execution": as_text(config.execution),
        "optimizer": as_text(config.optimizer),
        "device": config.device,
        "threads": config.threads,
    }


def _differences(a: dict[str, Any], b: dict[str, Any]) -> list[Difference]:
    keys = [*a, *(k for k in b if k not in a)]
    return [Difference(k, a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k)]


def _finite(value: Any) -> Any:
    """JSON has no inf or NaN: they become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
