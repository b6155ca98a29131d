"""`flowrate compile`: compile the step once, keep the artifacts, and print the compile report."""

from __future__ import annotations

from typing import Any

import click

from flowrate.cli.options import run_options, target_option


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
    from flowrate.cli.estimate_text import compile_lines, report_lines
    from flowrate.cli.resolve import resolve_run
    from flowrate.errors import ConfigError
    from flowrate.estimate.report import save_report
    from flowrate.harness.compile_once import compile_once
    from flowrate.results.codec import encode

    flags["compile"] = True
    config, problem = resolve_run(flags, sample_shape)
    if config.batch_size == "auto":
        raise ConfigError("batch_size", "compile needs a fixed batch size (auto searches by running steps)")
    console.status(
        f"flowrate compile: {problem.name}/{problem.size} {config.mode} {config.precision.value}", quiet
    )
    done = compile_once(config, problem, target=target, argv=sys.argv)
    lines = [*compile_lines(done.compiled, done.step_s), *report_lines(done.report)]
    directory = Path(out_dir) if out_dir else Path(done.compiled.directory)
    text, _ = save_report(done.report, lines, directory)
    console.status(f"compile report written to {text} (and .json)", quiet)
    if as_json:
        console.data(
            json.dumps({"compile": encode(done.compiled), "report": done.report.to_dict()}, indent=2)
        )
    else:
        console.data("\n".join(lines))
