"""Is B faster than A, or is the difference noise? The statistics of `flowrate compare`, pure.

One number per side says nothing about noise, so each figure is compared over its raw samples:
the compute intervals of every run on a side, pooled (a tag may name several runs), for the
figures every interval measures; the runs' own figures otherwise, which needs two runs or more
per side before a test means anything. For each metric of flowrate.results.metrics.METRICS the
comparison gives the centre of each side, the ratio B/A of the means, the difference B − A with
Welch's confidence interval, the p-value of Welch's t-test or of the Mann–Whitney U test (both in
flowrate.measure.stats), and a verdict. flowrate.cli.compare_text renders it.

A difference is called only when it is both significant (p < alpha) and large enough to matter
(|B − A| / A ≥ the minimum effect). The second condition is not decoration: intervals of one run
are not independent draws (clocks, thermals and the allocator drift together) and pooled
intervals hide the variation between runs, so p-values over intervals are optimistic; a minimum
effect keeps a 0.2% "significant" drift from failing a CI job.

The confidence interval is always Welch's interval for the difference of the means, also with
the Mann–Whitney test (whose p-value is about the distributions, not the means): it is the
interval a reader expects beside a ratio of means, and it needs no O(n_A·n_B) pairwise
differences. It is the 1 − alpha interval, so it excludes 0 exactly when Welch's p < alpha.

Two sides are also checked for comparability: runs of different problems (name, size, mode,
shape) are a mismatch the command refuses unless forced, and every differing field of the
environment fingerprint (device, CPU, software versions, threads) is listed as a warning.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from flowrate.measure.stats import DEFAULT_ALPHA, mann_whitney, welch
from flowrate.results.metrics import METRICS, Metric
from flowrate.results.schema import Result, environment_fingerprint
from flowrate.units import p_value

TESTS = ("welch", "mannwhitney")
DEFAULT_MIN_EFFECT = 0.01  # a relative difference under 1% is not called

# rate figures say faster/slower; every other figure better/worse
THROUGHPUT_METRICS = frozenset({"samples_per_sec", "tokens_per_sec", "model_flops_per_sec"})

NOT_SIGNIFICANT = "not significant"
NOT_AVAILABLE = "n/a"

# configuration fields that usually differ on purpose: shown, never a warning
_CONFIGURATION_FIELDS = ("precision", "execution", "optimizer", "device", "threads")


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
    """One metric of A against B. Figures are None where they cannot be had; ``reason`` says why.

    verdict: "faster"/"slower" (throughput) or "better"/"worse" when the difference is significant
    and at least the minimum effect; "not significant" (within noise, or below the minimum
    effect); "n/a" when no test is possible (one value per side, or a side without the figure).
    """

    metric: str
    label: str
    unit: str
    higher_is_better: bool
    source: str  # "intervals" (pooled compute intervals), "runs" (one value per run) or "" (none)
    n_a: int
    n_b: int
    mean_a: float | None
    mean_b: float | None
    median_a: float | None
    median_b: float | None
    stdev_a: float | None
    stdev_b: float | None
    ratio: float | None  # mean B / mean A
    difference: float | None  # mean B − mean A
    relative: float | None  # (mean B − mean A) / mean A
    ci_low: float | None  # Welch's (1 − alpha) interval of the difference, whichever the test
    ci_high: float | None
    df: float | None  # Welch–Satterthwaite degrees of freedom (Welch's test)
    statistic: float | None  # Welch's t, or Mann–Whitney's U of B
    p_value: float | None
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
    metrics: list[MetricComparison]
    # environment fingerprint fields that differ between A's and B's first runs
    environment_differences: list[Difference]
    # problem identity (name, size, mode, shape) that differs between A's and B's first runs, then
    # between runs of one side ("size (within A)")
    problem_mismatch: list[Difference]
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
        data = _finite(asdict(self))
        data["metrics"] = [
            {**m, "significant": c.significant} for m, c in zip(data["metrics"], self.metrics, strict=True)
        ]
        for key in ("environment_differences", "problem_mismatch", "configuration_differences"):
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
) -> Comparison:
    """Compare the runs of B against the runs of A (the baseline), metric by metric.

    ``test`` is "welch" or "mannwhitney"; ``alpha`` the significance level (the interval is the
    1 − alpha one); ``min_effect`` the smallest relative difference that is called (0.01 = 1%).
    """
    if not a or not b:
        raise ValueError("each side needs at least one run")
    if test not in TESTS:
        raise ValueError(f"test must be one of {TESTS}, got {test!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie between 0 and 1, got {alpha}")
    if min_effect < 0:
        raise ValueError(f"min_effect must not be negative, got {min_effect}")
    metrics = [
        m for metric in METRICS.values() if (m := compare_metric(metric, a, b, test, alpha, min_effect))
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
        metrics=metrics,
        environment_differences=_differences(
            environment_fingerprint(a[0].environment), environment_fingerprint(b[0].environment)
        ),
        problem_mismatch=mismatch,
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


def samples(metric: Metric, runs: Sequence[Result], source: str) -> list[float]:
    """A side's raw samples of a metric: pooled compute intervals, or one value per run."""
    if source == "intervals":
        return [v for run in runs for v in metric.interval_values(run)]
    return [v for run in runs if (v := metric.value(run)) is not None]


def compare_metric(
    metric: Metric,
    a: Sequence[Result],
    b: Sequence[Result],
    test: str = "welch",
    alpha: float = DEFAULT_ALPHA,
    min_effect: float = DEFAULT_MIN_EFFECT,
) -> MetricComparison | None:
    """One metric of B against A; None when neither side records it.

    The samples are the pooled interval values where both sides have them (a run of an older
    schema may not), else the per-run values.
    """
    source = "intervals"
    xs, ys = samples(metric, a, source), samples(metric, b, source)
    if not xs or not ys:
        source = "runs"
        xs, ys = samples(metric, a, source), samples(metric, b, source)
    if not xs and not ys:
        return None
    figures = _figures(metric, xs, ys)
    if not xs or not ys:
        missing = "A" if not xs else "B"
        return MetricComparison(
            **figures, source="", verdict=NOT_AVAILABLE, reason=f"not recorded in {missing}"
        )
    if len(xs) < 2 or len(ys) < 2:
        if len(xs) == len(ys) == 1:
            reason = "one value per side; a test needs 2 runs or more a side"
        else:
            reason = f"a test needs 2 values or more a side ({len(xs)} in A, {len(ys)} in B)"
        return MetricComparison(**figures, source=source, verdict=NOT_AVAILABLE, reason=reason)
    figures.update(_test(xs, ys, test, alpha))
    verdict, reason = _verdict(
        metric, figures["difference"], figures["relative"], figures["p_value"], alpha, min_effect
    )
    return MetricComparison(**figures, source=source, verdict=verdict, reason=reason)


def _figures(metric: Metric, xs: Sequence[float], ys: Sequence[float]) -> dict[str, Any]:
    """The metric, each side's centre and spread, and (when both sides have values) the ratio and
    difference of the means; the test's figures are None until _test fills them in."""
    ca, cb = _Centre.of(xs), _Centre.of(ys)
    figures: dict[str, Any] = {
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
        **dict.fromkeys(
            ("ratio", "difference", "relative", "ci_low", "ci_high", "df", "statistic", "p_value")
        ),
    }
    if xs and ys:
        mean_a, mean_b = ca.mean or 0.0, cb.mean or 0.0
        difference = mean_b - mean_a
        figures.update(
            difference=difference,
            ratio=mean_b / mean_a if mean_a else None,
            relative=difference / abs(mean_a) if mean_a else None,
        )
    return figures


def _test(xs: Sequence[float], ys: Sequence[float], test: str, alpha: float) -> dict[str, Any]:
    """The test's figures: Welch's interval whichever the test, and its statistic and p-value."""
    w = welch(xs, ys, alpha)
    if test == "welch":
        return {"ci_low": w.ci_low, "ci_high": w.ci_high, "df": w.df, "statistic": w.t, "p_value": w.p_value}
    u, p = mann_whitney(xs, ys)
    return {"ci_low": w.ci_low, "ci_high": w.ci_high, "statistic": u, "p_value": p}


def significantly_slower(comparison: Comparison, max_drop: float) -> bool | None:
    """For CI: is B's samples/s significantly slower than A's (the verdict 'slower') by more than
    ``max_drop`` (0.05 = 5%)? None when samples/s could not be tested."""
    throughput = comparison.metric("samples_per_sec")
    if throughput is None or throughput.p_value is None:
        return None
    return throughput.verdict == "slower" and -(throughput.relative or 0.0) > max_drop


def _verdict(
    metric: Metric, difference: float, relative: float | None, p: float, alpha: float, min_effect: float
) -> tuple[str, str]:
    if p >= alpha:
        return NOT_SIGNIFICANT, f"within noise (p = {p_value(p)} ≥ {alpha:g})"
    if difference == 0:  # p < alpha with equal means: the distributions differ, the means do not
        return NOT_SIGNIFICANT, "equal means"
    if relative is not None and abs(relative) < min_effect:
        return NOT_SIGNIFICANT, f"below the minimum effect ({relative:+.2%} is under {min_effect:.2%})"
    higher = difference > 0
    if metric.name in THROUGHPUT_METRICS:
        word = "faster" if higher else "slower"
    else:
        word = "better" if higher == metric.higher_is_better else "worse"
    effect = f", {relative:+.1%}" if relative is not None else ""
    return word, f"p = {p_value(p)}{effect}"


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
    """What must match for two runs to measure the same work: problem, size, mode and shape."""
    problem = result.problem or {}
    identity = {
        "problem": problem.get("name") or result.config.get("problem"),
        "size": problem.get("size") or result.config.get("size"),
        "mode": result.config.get("mode"),
    }
    settings = problem.get("settings")
    if isinstance(settings, dict):
        identity.update({f"shape.{key}": value for key, value in settings.items()})
    return identity


def configuration(result: Result) -> dict[str, Any]:
    """The settings a comparison usually varies on purpose: precision, batch size, execution, …"""
    values: dict[str, Any] = {"batch_size": result.batch_size}
    values.update({key: result.config.get(key) for key in _CONFIGURATION_FIELDS})
    return values


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
