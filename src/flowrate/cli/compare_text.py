"""`flowrate compare` as text: the table's cells, Markdown, and the lines around them.

Pure: a Comparison in, strings out (plain strings, shared by the terminal table and Markdown).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flowrate.results.identity import is_workload_field
from flowrate.units import DASH, compact, counted, p_value

if TYPE_CHECKING:
    from flowrate.results.compare import Comparison

# the columns of header() that hold figures
RIGHT_ALIGNED = (1, 2, 3, 4, 5)


def header(comparison: Comparison) -> list[str]:
    level = f"{1 - comparison.alpha:.0%}"
    return [
        "metric",
        f"{comparison.a_label} mean (median)",
        f"{comparison.b_label} mean (median)",
        "runs A / B",
        f"B/A [{level} CI]",
        "p",
        "verdict",
    ]


def rows(comparison: Comparison) -> list[list[str]]:
    """One row of cells per metric; a cell that cannot be had is '—' and the verdict says why."""
    table = []
    for m in comparison.metrics:
        label = f"{m.label} [{m.unit}]" if m.unit and m.unit not in m.label else m.label
        ratio = DASH
        if m.ratio is not None:
            ratio = f"{m.ratio:.3f}×" + (f" ({m.relative:+.1%})" if m.relative is not None else "")
            if m.ci_low is not None and m.ci_high is not None:
                ratio += f" [{m.ci_low:.3f}, {m.ci_high:.3f}]"
        table.append(
            [
                label,
                _centre(m.mean_a, m.median_a),
                _centre(m.mean_b, m.median_b),
                f"{m.n_a} / {m.n_b}",
                ratio,
                DASH if m.p_value is None else p_value(m.p_value),
                m.verdict_text,
            ]
        )
    return table


def evidence(comparison: Comparison) -> list[str]:
    """What each tested verdict rests on, once per distinct method and evidence: 'samples/s,
    model FLOP/s: 3 runs a side, between-run CV 1.9%; t-test of the log ratio, …'."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for m in comparison.metrics:
        if m.method and m.evidence:
            grouped.setdefault((m.evidence, m.method), []).append(m.label)
    return [f"{', '.join(labels)}: {ev}; {method}" for (ev, method), labels in grouped.items()]


def _centre(mean: float | None, median: float | None) -> str:
    if mean is None:
        return DASH
    return compact(mean) + (f" ({compact(median)})" if median is not None else "")


def title(comparison: Comparison) -> str:
    def side(label: str, runs: list[str]) -> str:
        shown = ", ".join(runs[:3]) + (f", … ({len(runs)} runs)" if len(runs) > 3 else "")
        return f"{label} = {shown}"

    return f"{side(comparison.a_label, comparison.a_runs)}  vs  {side(comparison.b_label, comparison.b_runs)}"


def configuration_line(comparison: Comparison) -> str | None:
    """What differs in the configuration (usually the point of the comparison), or None."""
    if not comparison.configuration_differences:
        return None
    return "configuration: " + "; ".join(str(d) for d in comparison.configuration_differences)


def to_markdown(comparison: Comparison) -> str:
    """A self-contained Markdown report: what was compared, a pipe table, and every warning."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    c = comparison
    lines = [
        f"**A** (baseline): {cell(c.a_label)} — {counted(len(c.a_runs), 'run')}: {', '.join(c.a_runs)}  ",
        f"**B**: {cell(c.b_label)} — {counted(len(c.b_runs), 'run')}: {', '.join(c.b_runs)}",
        "",
    ]
    head = header(c)
    lines.append("| " + " | ".join(cell(h) for h in head) + " |")
    lines.append("|" + "|".join("---:" if i in RIGHT_ALIGNED else "---" for i in range(len(head))) + "|")
    lines += ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows(c)]
    lines += ["", legend(c)]
    if found := evidence(c):
        lines += ["", "**Evidence**", ""] + [f"- {cell(e)}" for e in found]
    if c.configuration_differences:
        lines += ["", "Configuration: " + "; ".join(str(d) for d in c.configuration_differences) + "."]
    if c.warnings:
        lines += ["", "**Warnings**", ""] + [f"- {cell(w)}" for w in c.warnings]
    return "\n".join(lines) + "\n"


def legend(comparison: Comparison) -> str:
    c = comparison
    test = "the log-ratio t-test" if c.test == "welch" else "the Mann–Whitney U test"
    return (
        "Each run (process) is one value — its median interval value, or its own figure — and the "
        f"spread between runs is the noise. A difference is called when {test} gives p < "
        f"{c.alpha:g} and |B/A − 1| ≥ {c.min_effect:.2%}; the interval is the {1 - c.alpha:.0%} "
        "interval of the ratio of the means."
    )


def mismatch_message(comparison: Comparison) -> str:
    """Why the sides are refused: different problems, different machines, or both."""
    parts = []
    problems = [d for d in comparison.problem_mismatch if not is_workload_field(d.field)]
    workloads = [d for d in comparison.problem_mismatch if is_workload_field(d.field)]
    if problems:
        parts.append(f"runs of different problems ({'; '.join(str(d) for d in problems)})")
    if workloads:
        parts.append(f"runs of different kinds or workloads ({'; '.join(str(d) for d in workloads)})")
    if comparison.machine_mismatch:
        parts.append(f"runs on different machines ({'; '.join(str(d) for d in comparison.machine_mismatch)})")
    return f"A and B are {' and '.join(parts)}; use --force to compare anyway"


def untested_gate(comparison: Comparison) -> str:
    """--fail-if-slower could not test samples/s: why, and that it does not fail."""
    throughput = comparison.metric("samples_per_sec")
    why = throughput.reason if throughput else "neither side records it"
    return f"--fail-if-slower: samples/s could not be tested ({why}); not failing"


def slower_message(comparison: Comparison, fail_pct: float) -> str:
    """B is significantly slower than --fail-if-slower allows: by how much, and how sure."""
    throughput = comparison.metric("samples_per_sec")
    assert throughput is not None and throughput.p_value is not None  # significantly_slower said so
    return (
        f"{comparison.b_label} is significantly slower than {comparison.a_label}: samples/s "
        f"{throughput.relative or 0.0:+.1%} (p = {p_value(throughput.p_value)}; {throughput.evidence}), "
        f"more than the {fail_pct:g}% --fail-if-slower allows"
    )


def budget_line(budget: dict[str, Any]) -> str:
    """How a --budget was spent, in one line: the plan's reason, the runs and the analysis."""
    plan = budget["plan"]
    chose = f"{plan['reason']}; " if plan else ""
    return (
        f"budget {budget['budget_s']:g} s ({budget['elapsed_s']:.0f} s spent): {chose}"
        f"{budget['runs_a_side']} runs a side compared, {budget['analysis']}"
    )
