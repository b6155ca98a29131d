"""`flowrate scaling`: weak-scaling efficiency on this machine, one torchrun launch per size.

Parses the run options and the sizes, runs the study through
flowrate.campaigns.scaling.plan.scaling_study (which plans it, runs every size and records the
runs); prints the table and draws the plot. Each rank of a size runs flowrate.cli.scaling_worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from flowrate.cli.options import STORE_HELP, checked_tags, run_options

if TYPE_CHECKING:
    from flowrate.results.scaling_report import ScalingReport


@click.command("scaling")
@run_options
@click.option(
    "--nproc",
    required=True,
    metavar="N1,N2,…",
    help="Process counts to run, each a torchrun launch on this machine, e.g. 1,2,4.",
)
@click.option("--name", help="Name of the scaling study (tags its runs scaling:NAME). [default: an id]")
@click.option("--store", type=click.Path(dir_okay=False), help="Record the runs in this store. " + STORE_HELP)
@click.option(
    "-t", "--tag", "tags", multiple=True, callback=checked_tags, help="Label every recorded run (repeatable)."
)
@click.option("--no-store", is_flag=True, help="Do not record the runs.")
@click.option("--json", "as_json", is_flag=True, help="Print the scaling report as JSON on stdout.")
@click.option(
    "-o",
    "--out",
    type=click.Path(dir_okay=False),
    help="Plot throughput and efficiency to this .png or .svg.",
)
@click.option("-q", "--quiet", is_flag=True, help="No status lines on stderr.")
def command(
    nproc: str,
    name: str | None,
    store: str | None,
    tags: tuple[str, ...],
    no_store: bool,
    as_json: bool,
    out: str | None,
    quiet: bool,
    sample_shape: int | None,
    **flags: Any,
) -> None:
    """Weak scaling: the same per-rank batch at each process count; efficiency = T(N) / (N × T(1)).

    Every `flowrate run` option applies to each size (--batch-size is per rank). Each size runs
    as `torchrun --standalone --nproc-per-node N` on this machine; on a CPU each rank gets the
    cores divided by the largest size as threads unless --threads says otherwise. For several
    machines, launch `torchrun … -m flowrate run` per size yourself and compare the runs.
    """
    import json

    from flowrate.campaigns.scaling.plan import scaling_study
    from flowrate.campaigns.scaling.run import parse_sizes
    from flowrate.cli import console, scaling_text
    from flowrate.cli.resolve import resolve_run
    from flowrate.errors import ConfigError

    sizes = parse_sizes(nproc)
    if no_store and (store or tags):
        raise ConfigError("no_store", "cannot be combined with --store or --tag")
    config, problem = resolve_run(flags, sample_shape)
    if out:
        from flowrate.analysis.plots import format_for

        format_for(out)  # an unknown image format fails now, not after the runs
    plan, report = scaling_study(
        config,
        sizes,
        name=name,
        store=store,
        record=not no_store,
        tags=tags,
        on_plan=lambda plan: console.status(scaling_text.start_line(plan, problem), quiet),
        on_size=lambda n, result: console.status(scaling_text.size_line(n, result), quiet),
    )
    title = scaling_text.title(plan, problem)
    if out:
        _plot(report, title, out, quiet)
    if as_json:
        console.data(json.dumps(report.to_dict(), indent=2))
    else:
        console.grid(title, scaling_text.HEADER, scaling_text.rows(report), scaling_text.RIGHT_ALIGNED)
        for line in scaling_text.communication_lines(report):
            console.data(line)


def _plot(report: ScalingReport, title: str, out: str, quiet: bool) -> None:
    from flowrate.analysis.plots import save
    from flowrate.analysis.plots_scaling import scaling_figure
    from flowrate.cli import console

    save(scaling_figure(report, title), out)
    console.status(f"plot written to {out}", quiet)
