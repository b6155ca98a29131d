"""Pure formatters: results in, lines out. No printing here, so tests can assert exact text."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flowrate.results.schema import Result

_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si(value: float, unit: str = "", digits: int = 3) -> str:
    """1234567 -> '1.23 M' + unit: engineering prefixes, ``digits`` significant figures."""
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{_sig(value / scale, digits)} {prefix}{unit}"
    return f"{_sig(value, digits)} {unit}".rstrip()


def count(value: float) -> str:
    """Parameter counts as people say them: 124.4 M, 6.658 B."""
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{_sig(value / scale, 4)} {suffix}"
    return str(int(value))


def _sig(value: float, digits: int) -> str:
    text = f"{value:.{digits}g}"
    if "e" in text:  # keep fixed notation for human tables
        text = f"{value:.{max(digits - 1, 0)}f}"
    return text


def rate(value: float | None) -> str:
    return "—" if value is None else f"{_sig(value, 4)}"


def summary_rows(result: Result) -> list[tuple[str, str]]:
    """The human summary of one run, as (label, value) rows."""
    s = result.summary
    c = result.config
    p = result.problem
    device = result.environment.get("device", {}).get("name") or c["device"]
    optimizer = c["optimizer"] if c["mode"] == "train" else ""
    rows = [
        (
            "problem",
            f"{p['name']}/{p['size']}  ({count(p['parameters'])} parameters, {_blocks(p['blocks'])})",
        ),
        ("run", f"{c['mode']}  {c['precision']}  batch {result.batch_size}  {optimizer}".rstrip()),
        ("device", str(device)),
        (
            "throughput",
            f"{rate(s.samples_per_sec)} samples/s (GlobalRate)  {rate(s.steps_per_sec)} steps/s",
        ),
    ]
    if s.tokens_per_sec is not None:
        rows.append(("tokens", f"{si(s.tokens_per_sec, digits=4)} tokens/s"))
    rows += [
        ("Rate", f"{rate(s.rate_samples_per_sec)} samples/s (smoothed, last sample point)"),
        ("intervals", _interval_line(result)),
        ("spread", _spread_line(result)),
        (
            "model FLOP/s",
            f"{si(s.model_flops_per_sec, 'FLOP/s')}  ({si(p['model_flops_per_sample'], 'FLOP')} per sample)",
        ),
        (
            "timed",
            f"{s.timed_steps} steps, {s.timed_samples} samples in {s.timed_duration_s:.2f} s "
            f"(sample point every {s.sample_every_steps} steps)",
        ),
        ("preheat", f"{s.preheat_steps} steps in {s.preheat_s:.2f} s (not timed)"),
    ]
    if s.final_loss is not None:
        rows.append(("final loss", f"{s.final_loss:.4f}"))
    if result.batch_size_search:
        tried = ", ".join(
            f"{a['batch_size']} {'fits' if a['fits'] else 'OOM'}" for a in result.batch_size_search
        )
        rows.append(("batch search", tried))
    return rows


def _blocks(count: int | None) -> str:
    return "no blocks declared" if count is None else f"{count} blocks"


def _interval_line(result: Result) -> str:
    s = result.summary
    if s.ci95_low_samples_per_sec is None or s.ci95_high_samples_per_sec is None:
        return f"median {rate(s.median_samples_per_sec)} samples/s over {s.intervals} interval(s)"
    half = (s.ci95_high_samples_per_sec - s.ci95_low_samples_per_sec) / 2
    return (
        f"median {rate(s.median_samples_per_sec)}, mean {rate(s.mean_samples_per_sec)} ± {rate(half)} "
        f"(95% CI) samples/s over {s.intervals} intervals"
    )


def _spread_line(result: Result) -> str:
    s = result.summary
    if s.p5_samples_per_sec is not None and s.p95_samples_per_sec is not None:
        ends = f"p5 {rate(s.p5_samples_per_sec)}  p95 {rate(s.p95_samples_per_sec)}"
    else:
        ends = f"min {rate(s.min_samples_per_sec)}  max {rate(s.max_samples_per_sec)}"
    return f"stdev {rate(s.stdev_samples_per_sec)}  CV {s.cv:.1%}  {ends}"
