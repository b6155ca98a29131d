"""Is B faster than A, or is the difference noise? The statistics of `flowrate compare`, pure.

One number per side says nothing about noise, so each figure is compared over its raw samples:
the compute intervals of every run on a side, pooled (a tag may name several runs), for the
figures every interval measures; the runs' own figures otherwise, which needs two runs or more
per side before a test means anything. For each metric of flowrate.results.metrics.METRICS the
comparison gives the centre of each side, the ratio B/A of the means, the difference B − A with
Welch's confidence interval, the p-value of Welch's t-test or of the Mann–Whitney U test, and a
verdict.

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
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from scipy import stats as scipy_stats

from flowrate.results.metrics import METRICS, Metric
from flowrate.results.schema import Result, environment_fingerprint

TESTS = ("welch", "mannwhitney")
DEFAULT_ALPHA = 0.05
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
class Welch:
    """Welch's t-test of mean(B) − mean(A), and its confidence interval.

    ``df`` and ``t`` are None when both sides have zero variance: then p is 1 for equal means
    and 0 for different ones, and the interval is the difference itself.
    """

    difference: float
    standard_error: float
    df: float | None
    t: float | None
    p_value: float
    ci_low: float
    ci_high: float


def welch(a: Sequence[float], b: Sequence[float], alpha: float = DEFAULT_ALPHA) -> Welch:
    """Welch's unequal-variance t-test of B against A, with the (1 − alpha) interval of B − A.

    Welch–Satterthwaite degrees of freedom; two-sided p. Each side needs 2 values or more.
    """
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        raise ValueError(f"Welch's test needs 2 values or more on each side, got {na} and {nb}")
    difference = statistics.fmean(b) - statistics.fmean(a)
    qa = statistics.variance(a) / na
    qb = statistics.variance(b) / nb
    se2 = qa + qb
    if se2 == 0:  # both sides constant: no noise at all, so any difference is certain
        return Welch(difference, 0.0, None, None, 1.0 if difference == 0 else 0.0, difference, difference)
    se = math.sqrt(se2)
    denominator = qa**2 / (na - 1) + qb**2 / (nb - 1)
    df = se2**2 / denominator if denominator > 0 else math.inf  # underflow: as good as normal
    t = difference / se
    p = float(2 * scipy_stats.t.sf(abs(t), df))
    half = float(scipy_stats.t.ppf(1 - alpha / 2, df)) * se
    return Welch(
        difference, se, df if math.isfinite(df) else None, t, p, difference - half, difference + half
    )


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann–Whitney U test: (U of B, p). U of B counts the pairs where B's value is the
    larger (ties count one half); scipy chooses the exact distribution for small samples without
    ties, the normal approximation with tie correction otherwise."""
    if not a or not b:
        raise ValueError("the Mann–Whitney test needs a value on each side")
    if min(a) == max(a) == min(b) == max(b):  # all tied: no evidence either way (scipy: 0/0)
        return len(a) * len(b) / 2, 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = scipy_stats.mannwhitneyu(b, a, alternative="two-sided")
    return float(result.statistic), float(result.pvalue)


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
    notes = []
    for label, side in zip(labels, (a, b), strict=True):
        for run in side[1:]:
            for d in _differences(
                environment_fingerprint(side[0].environment), environment_fingerprint(run.environment)
            ):
                notes.append(
                    f"runs of {label} differ among themselves: {d} ({side[0].run_id} vs {run.run_id})"
                )
            for d in _differences(problem_identity(side[0]), problem_identity(run)):
                within = Difference(f"{d.field} (within {label})", d.a, d.b)
                if within not in mismatch:  # pooling runs of different problems means nothing either
                    mismatch.append(within)
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
    ca, cb = _Centre.of(xs), _Centre.of(ys)
    base: dict[str, Any] = {
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
    }
    nothing: dict[str, Any] = dict.fromkeys(
        ("ratio", "difference", "relative", "ci_low", "ci_high", "df", "statistic", "p_value")
    )
    if not xs or not ys:
        missing = "A" if not xs else "B"
        return MetricComparison(
            **base,
            source="",
            **nothing,
            verdict=NOT_AVAILABLE,
            reason=f"not recorded in {missing}",
        )
    mean_a, mean_b = ca.mean or 0.0, cb.mean or 0.0
    difference = mean_b - mean_a
    ratio = mean_b / mean_a if mean_a else None
    relative = difference / abs(mean_a) if mean_a else None
    figures = {
        **base,
        **nothing,
        "source": source,
        "ratio": ratio,
        "difference": difference,
        "relative": relative,
    }
    if len(xs) < 2 or len(ys) < 2:
        if len(xs) == len(ys) == 1:
            reason = "one value per side; a test needs 2 runs or more a side"
        else:
            reason = f"a test needs 2 values or more a side ({len(xs)} in A, {len(ys)} in B)"
        return MetricComparison(**figures, verdict=NOT_AVAILABLE, reason=reason)
    w = welch(xs, ys, alpha)
    figures.update(ci_low=w.ci_low, ci_high=w.ci_high)
    if test == "welch":
        figures.update(df=w.df, statistic=w.t, p_value=w.p_value)
        p = w.p_value
    else:
        u, p = mann_whitney(xs, ys)
        figures.update(statistic=u, p_value=p)
    verdict, reason = _verdict(metric, difference, relative, p, alpha, min_effect)
    return MetricComparison(**figures, verdict=verdict, reason=reason)


def _verdict(
    metric: Metric, difference: float, relative: float | None, p: float, alpha: float, min_effect: float
) -> tuple[str, str]:
    if p >= alpha:
        return NOT_SIGNIFICANT, f"within noise (p = {format_p(p)} ≥ {alpha:g})"
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
    return word, f"p = {format_p(p)}{effect}"


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


# --- presentation: plain strings, shared by the terminal table and Markdown ----------------------

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
DASH = "—"


def format_p(p: float) -> str:
    if p == 0:
        return "0"
    return f"{p:.2g}" if p >= 1e-4 else f"{p:.1e}"


def figure(value: float | None, digits: int = 4) -> str:
    """1234567 -> '1.235M': engineering prefixes, ``digits`` significant figures."""
    if value is None:
        return DASH
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g}{prefix}"
    if value != 0 and abs(value) < 1e-3:
        return f"{value:.{digits - 1}e}"
    return f"{value:.{digits}g}"


def header(comparison: Comparison) -> list[str]:
    level = f"{1 - comparison.alpha:.0%}"
    test = "Welch" if comparison.test == "welch" else "Mann–Whitney"
    return [
        "metric",
        f"{comparison.a_label} mean (median)",
        f"{comparison.b_label} mean (median)",
        "n A / B",
        "B/A",
        f"B − A [{level} CI]",
        f"p ({test})",
        "verdict",
    ]


RIGHT_ALIGNED = (1, 2, 3, 4, 5, 6)


def rows(comparison: Comparison) -> list[list[str]]:
    """One row of cells per metric; a cell that cannot be had is '—' and the verdict says why."""
    table = []
    for m in comparison.metrics:
        label = f"{m.label} [{m.unit}]" if m.unit and m.unit not in m.label else m.label
        if m.source == "runs":
            label += " (per run)"
        ratio = DASH
        if m.ratio is not None:
            ratio = f"{m.ratio:.3f}×" + (f" ({m.relative:+.1%})" if m.relative is not None else "")
        difference = DASH
        if m.difference is not None:
            difference = figure(m.difference)
            if m.ci_low is not None and m.ci_high is not None:
                difference += f" [{figure(m.ci_low)}, {figure(m.ci_high)}]"
        table.append(
            [
                label,
                _centre(m.mean_a, m.median_a),
                _centre(m.mean_b, m.median_b),
                f"{m.n_a} / {m.n_b}",
                ratio,
                difference,
                DASH if m.p_value is None else format_p(m.p_value),
                m.verdict_text,
            ]
        )
    return table


def _centre(mean: float | None, median: float | None) -> str:
    if mean is None:
        return DASH
    return figure(mean) + (f" ({figure(median)})" if median is not None else "")


def title(comparison: Comparison) -> str:
    def side(label: str, runs: list[str]) -> str:
        shown = ", ".join(runs[:3]) + (f", … ({len(runs)} runs)" if len(runs) > 3 else "")
        return f"{label} = {shown}"

    return f"{side(comparison.a_label, comparison.a_runs)}  vs  {side(comparison.b_label, comparison.b_runs)}"


def to_markdown(comparison: Comparison) -> str:
    """A self-contained Markdown report: what was compared, a pipe table, and every warning."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    c = comparison
    lines = [
        f"**A** (baseline): {cell(c.a_label)} — {len(c.a_runs)} run(s): {', '.join(c.a_runs)}  ",
        f"**B**: {cell(c.b_label)} — {len(c.b_runs)} run(s): {', '.join(c.b_runs)}",
        "",
    ]
    head = header(c)
    lines.append("| " + " | ".join(cell(h) for h in head) + " |")
    lines.append("|" + "|".join("---:" if i in RIGHT_ALIGNED else "---" for i in range(len(head))) + "|")
    lines += ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows(c)]
    lines += ["", legend(c)]
    if c.configuration_differences:
        lines += ["", "Configuration: " + "; ".join(str(d) for d in c.configuration_differences) + "."]
    if c.warnings:
        lines += ["", "**Warnings**", ""] + [f"- {cell(w)}" for w in c.warnings]
    return "\n".join(lines) + "\n"


def legend(comparison: Comparison) -> str:
    c = comparison
    test = "Welch's t-test" if c.test == "welch" else "the Mann–Whitney U test"
    return (
        f'Samples: compute intervals pooled over each side\'s runs ("per run": one value per run). '
        f"A difference is called when {test} gives p < {c.alpha:g} and |B − A| / A ≥ "
        f"{c.min_effect:.2%}; the interval is Welch's {1 - c.alpha:.0%} interval of the difference "
        "of the means."
    )
