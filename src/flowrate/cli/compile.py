"""`flowrate compile`: compile the step once, keep the artifacts, and print the compile report."""

from __future__ import annotations

from typing import Any

import click

from flowrate.cli.run import resolve_run, run_options
from flowrate.cli.validate import target_option


@click.command("compile")
@run_options
@target_option
@click.option(
    "-o",
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Write compile_report.txt and compile_report.json here. [default: the cache entry's folder]",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout instead of text.")
@click.option("-q", "--quiet", is_flag=True, help="No status lines on stderr.")
def command(
    target: str | None,
    out_dir: str | None,
    as_json: bool,
    quiet: bool,
    sample_shape: int | None,
    **flags: Any,
) -> None:
    """Compile the training or inference step with torch.compile and cache what it compiled.

    The artifacts (inductor's FX graph and AOTAutograd caches, the generated kernels) are kept in
    a folder keyed by the configuration and the software versions ($FLOWRATE_CACHE, else
    ~/.cache/flowrate/compile/KEY); `flowrate run --compile` with the same options reuses them.
    Prints the compile time, whether the cache was hit, and the compile report (with --target,
    the estimate for that device), which is also written as compile_report.txt and .json.
    """
    import json
    import sys
    from pathlib import Path

    from flowrate.cli import console
    from flowrate.cli.estimate_text import report_lines
    from flowrate.errors import ConfigError
    from flowrate.estimate.report import report_for, save_report
    from flowrate.harness.run import run_config

    flags["compile"] = True
    config, problem = resolve_run(
        flags, sample_shape, None, lambda c, p: c.for_problem(p.modes, p.default_mode, p.name)
    )
    if config.batch_size == "auto":
        raise ConfigError("batch_size", "compile needs a fixed batch size (auto searches by running steps)")
    console.status(
        f"flowrate compile: {problem.name}/{problem.size} {config.mode} {config.precision.value}", quiet
    )
    once = config.replace(
        preheat_steps=0,
        steps=1,
        sample_every=1,
        measure_peak=False,
        checkpoint_every=None,
        checkpoint_dir=None,
    )
    result = run_config(once, problem, argv=sys.argv)
    compiled = result.compile or {}
    report = report_for(config, problem, target=target, batch_size=result.batch_size)
    lines = [*compile_lines(compiled, result.summary.timed_duration_s), *report_lines(report)]
    directory = Path(out_dir) if out_dir else Path(compiled["directory"])
    text, _ = save_report(report, lines, directory)
    console.status(f"compile report written to {text} (and .json)", quiet)
    if as_json:
        console.data(json.dumps({"compile": compiled, "report": report.to_dict()}, indent=2))
    else:
        console.data("\n".join(lines))


def compile_lines(compiled: dict[str, Any], step_s: float) -> list[str]:
    """'compiled in 41.2 s: cache miss (3 graphs compiled and saved in …)'."""
    hits, misses = compiled.get("cache_hits", 0), compiled.get("cache_misses", 0)
    if compiled.get("cache_hit"):
        cache = f"cache hit ({hits} graphs found in {compiled.get('directory')})"
    elif hits:
        cache = f"partly cached ({hits} graphs found, {misses} compiled, in {compiled.get('directory')})"
    else:
        cache = f"cache miss ({misses} graphs compiled and saved in {compiled.get('directory')})"
    return [
        f"compiled in {compiled.get('compile_s', 0.0):.3g} s: {cache}",
        f"one compiled step then took {step_s * 1e3:.4g} ms",
    ]
