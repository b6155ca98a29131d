"""Text for compile and estimate: the compile report (compile_report.txt), the compile's own
lines, and predicted against measured for recorded runs.

Pure: data in, lines or rows out.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Any

from flowrate.units import count, counted, gib, rate, short_duration, si

if TYPE_CHECKING:
    from flowrate.analysis.estimate_check import RunCheck
    from flowrate.analysis.estimate_drift import MachineDrift
    from flowrate.estimate.check import EstimateCheck
    from flowrate.estimate.report import CompileReport
    from flowrate.results.sections import Compile

_INDENT = " " * 18


def report_lines(report: CompileReport) -> list[str]:
    """compile_report.txt: the configuration, the model's counts, memory, the device, the
    estimate and the blocks."""
    c = report.configuration
    optimizer = f"  {c['optimizer']}" if c["optimizer"] else ""
    recompute = " --recompute" if c["recompute"] else ""
    lines = [
        f"compile report: {c['problem']}/{c['size']}  {c['mode']}  {c['precision']}  batch {c['batch_size']}"
        f"{optimizer}  {c['execution']}{recompute}",
        _row(
            "parameters",
            f"{count(report.parameters)} (counted on the meta device: "
            f"{count(report.parameters_traced)}), {_blocks(report.blocks)}",
        ),
    ]
    lines += _work_lines(report)
    lines.append(_row("activations", f"{gib(report.activation_bytes)} saved for backward"))
    lines += _memory_lines(report)
    lines += _device_lines(report)
    lines += _estimate_lines(report)
    lines += _block_lines(report)
    return lines


def _work_lines(report: CompileReport) -> list[str]:
    """A step's work: model and kernel FLOPs, bytes moved and their intensity."""
    flops = f"forward {si(report.forward_flops_per_sample, 'FLOP')}/sample"
    if report.backward_flops_per_sample is not None:
        flops += f", backward {si(report.backward_flops_per_sample, 'FLOP')}/sample"
    executed = f"forward {si(report.traced_forward_flops_per_sample, 'FLOP')}/sample"
    if report.traced_backward_flops_per_sample:
        executed += f", backward {si(report.traced_backward_flops_per_sample, 'FLOP')}/sample"
    lines = [
        _row("model FLOPs", flops + " (analytic)"),
        _row("kernel FLOPs", executed + " (traced; causal attention counts its unmasked half)"),
        _row(
            "bytes per step",
            f"{si(report.bytes_per_step, 'B')} read + written by {report.kernels_per_step} kernels",
        ),
    ]
    if report.arithmetic_intensity is not None:
        ridge = report.device.get("ridge_point") or {}
        precision = report.configuration["precision"]
        key = "bf16" if precision in ("bf16", "pure-bf16") else precision
        where = f" (the device's ridge point at {key}: {ridge[key]:.3g})" if key in ridge else ""
        lines.append(_row("intensity", f"{report.arithmetic_intensity:.3g} FLOP/byte{where}"))
    return lines


def compile_lines(compiled: Compile, step_s: float) -> list[str]:
    """'compiled in 41.2 s: cache miss (3 graphs compiled and saved in …)'."""
    hits, misses = compiled.cache_hits, compiled.cache_misses
    if compiled.cache_hit:
        cache = f"cache hit ({counted(hits, 'graph')} found in {compiled.directory})"
    elif hits:
        where = compiled.directory
        cache = f"partly cached ({counted(hits, 'graph')} found, {misses} compiled, in {where})"
    else:
        cache = f"cache miss ({counted(misses, 'graph')} compiled and saved in {compiled.directory})"
    return [
        f"compiled in {compiled.compile_s or 0.0:.3g} s: {cache}",
        f"one compiled step then took {step_s * 1e3:.4g} ms",
    ]


def _row(label: str, text: str) -> str:
    return f"{label:<18}{text}"


def _blocks(blocks: int | None) -> str:
    return "no blocks declared" if blocks is None else counted(blocks, "block")


def _memory_lines(report: CompileReport) -> list[str]:
    memory = report.memory
    out = []
    for name, need in memory["needs"].items():
        if not need["available"]:
            text = f"{name}: — ({need['reason']})"
        else:
            parts = ", ".join(f"{k} {gib(v)}" for k, v in need["parts"].items() if v)
            text = f"{name}: {gib(need['device_bytes'])} on the device ({parts})"
            if need["host_bytes"] is not None:
                text += f"; {gib(need['host_bytes'])} on the host"
        if name == memory["chosen"]:
            text += " [chosen]"
        out.append(text)
    for fit in memory["fits"]:
        if fit["capacity"] is None:
            out.append(f"{fit['where']} capacity unknown: fit not checked")
            continue
        verdict = "fits" if fit["fits"] else "DOES NOT FIT"
        tight = ", tight" if fit["tight"] else ""
        out.append(f"{verdict} the {fit['where']}: {gib(fit['need'])} of {gib(fit['capacity'])}{tight}")
    return [_row("memory" if i == 0 else "", line) for i, line in enumerate(out)]


def _device_lines(report: CompileReport) -> list[str]:
    d = report.device
    if d.get("name") is None:
        return []
    rates = ", ".join(f"{key} {si(value, 'FLOP/s')}" for key, value in d["flops"].items())
    link = f"; host link {si(d['host_link_bandwidth'], 'B/s')}" if d.get("host_link_bandwidth") else ""
    memory = si(d["memory_bandwidth"], "B/s")
    if d.get("best_bandwidth", 0) > d["memory_bandwidth"] * 1.05:
        memory += f" for large copies (up to {si(d['best_bandwidth'], 'B/s')} in cache)"
    return [
        _row("device", f"{d['name']} ({d['type']}): {d['basis']}"),
        _row("", f"large GEMM {rates}; memory {memory}{link}"),
    ]


def _estimate_lines(report: CompileReport) -> list[str]:
    e = report.estimate
    if e is None:
        return [_row("estimate", f"— ({report.reasons.get('estimate', 'not made')})")]
    tokens = f", {si(e.tokens_per_sec, 'tokens/s')}" if e.tokens_per_sec else ""
    step = e.step_s
    phases = ", ".join(f"{name} {seconds / step:.0%}" for name, seconds in e.phase_s.items() if seconds)
    return [
        _row("estimate", f"{rate(e.samples_per_sec)} samples/s{tokens} (step {short_duration(step)})"),
        _row("", "time: " + ", ".join(f"{name} {seconds / step:.0%}" for name, seconds in e.terms.items())),
        _row("", f"phases: {phases}"),
        *_streaming_lines(report),
    ]


def _streaming_lines(report: CompileReport) -> list[str]:
    """The streaming estimate: its rate, its copies and how much of them compute hides, or why
    there is none."""
    s = report.streaming
    if s is None:
        return (
            [_row("streaming", f"— ({report.reasons['streaming']})")] if "streaming" in report.reasons else []
        )
    lines = [
        _row(
            "streaming",
            f"{rate(s.samples_per_sec)} samples/s (step {short_duration(s.step_s)}): copies "
            f"{short_duration(s.copy_s)} per step over the {s.host_link_basis} at "
            f"{si(s.host_link_bandwidth, 'B/s')}, {s.hidden_share:.0%} hidden behind compute",
        )
    ]
    bounds = []
    if s.tokens_per_load is not None:  # MEASUREMENT.md's T = F / B is about tokens
        bounds.append(
            f"compute-bound from {si(s.min_tokens_per_load)} tokens per weight load "
            f"(this step: {si(s.tokens_per_load)})"
        )
    if s.batch_to_hide is not None:
        bounds.append(f"batch size to hide every copy: {s.batch_to_hide}")
    if bounds:
        lines.append(_row("", "; ".join(bounds)))
    return lines + [_row("", note) for note in s.notes]


def _block_lines(report: CompileReport) -> list[str]:
    if not report.block_rows:
        return []
    total = sum(row.seconds or 0.0 for row in report.block_rows)
    columns = ("parameters", "fwd FLOP", "bwd FLOP", "bytes", "activ.")
    header = f"{'#':>3}  {'block':<14}" + "".join(f"{c:>11}" for c in columns)
    header += f"{'time':>8}  bound by" if total else ""
    lines = [_row("per block", header)]
    for row in report.block_rows:
        text = (
            f"{row.index:>3}  {row.name[:13]:<14}{count(row.parameters):>11}{si(row.forward_flops):>11}"
            f"{si(row.backward_flops):>11}{si(row.bytes, 'B'):>11}{gib(row.activation_bytes):>11}"
        )
        if total:
            text += f"{(row.seconds or 0.0) / total:>8.0%}  {row.dominant or ''}"
        lines.append(_row("", text))
    return lines


CHECK_HEADER = ("run", "problem", "mode", "precision", "batch", "device", "predicted", "measured", "ratio")


def check_rows(checks: list[RunCheck]) -> list[list[str]]:
    """Predicted against measured samples/s, one row per run."""
    return [
        [
            c.run_id[:8],
            c.problem,
            c.mode,
            c.precision,
            c.batch_size,
            c.device,
            rate(c.predicted),
            rate(c.measured),
            f"{c.ratio:.2f}" if c.ratio is not None else "—",
        ]
        for c in checks
    ]


def check_summary(checks: list[RunCheck]) -> list[str]:
    """How close the runs' predictions came, and how many runs had none, and why."""
    ratios = [c.ratio for c in checks if c.ratio is not None]
    missing: dict[str, int] = {}
    for c in checks:
        if c.reason is not None:
            missing[c.reason] = missing.get(c.reason, 0) + 1
    summary = []
    if ratios:
        errors = [abs(r - 1) for r in ratios]
        within = sum(e <= 0.3 for e in errors)
        summary.append(
            f"{len(ratios)} run(s) with an estimate: median |error| {statistics.median(errors):.0%}, "
            f"median ratio {statistics.median(ratios):.2f} (predicted / measured), "
            f"{within} of {len(ratios)} within ±30%"
        )
    for reason, n in missing.items():
        summary.append(f"{n} run(s) without an estimate: {reason}")
    return summary


DRIFT_HEADER = ("recorded", "run", "configuration", "predicted", "measured", "ratio", "prediction")


def drift_tables(groups: list[MachineDrift]) -> list[tuple[str, list[list[str]], str]]:
    """Per machine, oldest run first: (title, rows, summary line) of predicted ÷ measured."""
    from flowrate.analysis.html import when

    tables = []
    for group in groups:
        rows = [
            [
                when(p.created_at, zone=False) if p.created_at else "?",
                p.run_id[:8],
                p.configuration,
                rate(p.predicted),
                rate(p.measured),
                f"{p.ratio:.2f}" if p.ratio is not None else "—",
                p.source + (f" [{p.cost_model}]" if p.cost_model and p.ratio is not None else ""),
            ]
            for p in group.points
        ]
        tables.append((f"predicted ÷ measured over time on {group.label}", rows, group.summary()))
    return tables


def drift_json(groups: list[MachineDrift]) -> list[dict[str, Any]]:
    return [
        {
            "machine": g.machine,
            "runs": [
                {
                    "run": p.run_id,
                    "recorded": p.created_at,
                    "configuration": p.configuration,
                    "predicted": p.predicted,
                    "measured": p.measured,
                    "ratio": p.ratio,
                    "prediction": p.source,
                    "cost_model": p.cost_model,
                }
                for p in g.points
            ],
        }
        for g in groups
    ]


def check_json(checked: EstimateCheck) -> dict[str, Any]:
    """`estimate --check --json`: the runs' rows by column, the summary, each machine's drift and
    the profiled runs' per-operator views."""
    from flowrate.cli import op_check_text

    return {
        "runs": [dict(zip(CHECK_HEADER, row, strict=True)) for row in check_rows(checked.runs)],
        "summary": check_summary(checked.runs),
        "machines": drift_json(checked.machines),
        "operators": op_check_text.check_json(checked.operators),
    }
