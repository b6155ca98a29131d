"""`flowrate scaling`: weak-scaling efficiency on this machine, one torchrun launch per size.

Parses the run options and the sizes, runs each size through flowrate.campaigns.scaling, records
the runs, prints the table and draws the plot. Run as a module (`python -m flowrate.cli.scaling
CONFIG.json RESULT.json`) it is the worker torchrun starts on every rank of a size.
"""

from __future__ import annotations

import sys
import uuid
from typing import TYPE_CHECKING, Any

import click

from flowrate.cli.run import resolve_run, run_options, span
from flowrate.cli.select import STORE_HELP

if TYPE_CHECKING:
    from flowrate.campaigns.scaling import ScalingReport


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
@click.option("-t", "--tag", "tags", multiple=True, help="Label every recorded run (repeatable).")
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
    import contextlib
    import dataclasses

    import torch

    from flowrate.campaigns.scaling import check_weak_scaling, parse_sizes, run_scaling, threads_per_rank
    from flowrate.cli import console
    from flowrate.errors import ConfigError
    from flowrate.results.store import Store

    sizes = parse_sizes(nproc)
    if no_store and (store or tags):
        raise ConfigError("no_store", "cannot be combined with --store or --tag")
    config, problem = resolve_run(
        flags, sample_shape, None, lambda c, p: c.for_problem(p.modes, p.default_mode, p.name)
    )
    check_weak_scaling(config)
    if out:
        from flowrate.analysis.plots import format_for

        format_for(out)  # an unknown image format fails now, not after the runs
    cuda = config.device.startswith("cuda") or (config.device == "auto" and torch.cuda.is_available())
    config = dataclasses.replace(config, threads=threads_per_rank(config, sizes, cuda))
    label = name or f"scaling-{uuid.uuid4().hex[:6]}"
    threads = f", {config.threads} thread(s) per rank" if config.threads else ""
    console.status(
        f"flowrate scaling {label}: {problem.name}/{problem.size} {config.mode}, batch "
        f"{config.batch_size or problem.default_batch_size} per rank{threads}, at "
        f"{', '.join(map(str, sizes))} processes; each times {span(config)}",
        quiet,
    )

    with contextlib.ExitStack() as stack:
        opened = None if no_store else stack.enter_context(Store(store))

        def recorded(processes: int, result: Any) -> None:
            if opened is not None:
                opened.add(result, (f"scaling:{label}", f"nproc:{processes}", *tags))
            total = result.summary.samples_per_sec
            console.status(f"{processes} process(es): {total:.4g} samples/s (run {result.run_id})", quiet)

        report, _ = run_scaling(config, sizes, label, on_size=recorded)
    if out:
        from flowrate.analysis.plots import save, scaling_figure

        save(scaling_figure(report, f"weak scaling {label}: {problem.name}/{problem.size}"), out)
        console.status(f"plot written to {out}", quiet)
    if as_json:
        import json

        console.data(json.dumps(report.to_dict(), indent=2))
        return
    header, rows = table(report)
    title = f"weak scaling {label}: {problem.name}/{problem.size}"
    console.grid(title, header, rows, right_aligned=(0, 1, 2, 3))


def table(report: ScalingReport) -> tuple[list[str], list[list[str]]]:
    """The report as a table: processes, summed and per-rank samples/s, efficiency, run id."""
    from flowrate.units import rate

    header = ["processes", "samples/s (sum)", "per rank", "efficiency", "run"]
    rows = [
        [
            str(p.processes),
            rate(p.samples_per_sec),
            rate(p.samples_per_sec_per_rank),
            f"{p.efficiency:.1%}",
            p.run_id,
        ]
        for p in report.points
    ]
    return header, rows


def worker(config_file: str, result_file: str) -> int:
    """One rank of a size: run the configuration; rank 0 writes the merged Result (exit codes as
    `flowrate run`'s)."""
    import json
    from pathlib import Path

    from flowrate.cli import console
    from flowrate.cli.main import EXIT_FAILED, EXIT_USAGE, flag_name
    from flowrate.config import RunConfig
    from flowrate.errors import ConfigError, FlowrateError
    from flowrate.execution.distributed import is_primary
    from flowrate.harness.run import run_config

    try:
        result = run_config(RunConfig.from_dict(json.loads(Path(config_file).read_text())))
    except ConfigError as mistake:
        console.error(f"{flag_name(mistake.field)}: {mistake.message}")
        return EXIT_USAGE
    except FlowrateError as failure:
        console.error(str(failure))
        return EXIT_FAILED
    if is_primary():
        result.save(result_file)
    return 0


if __name__ == "__main__":
    sys.exit(worker(sys.argv[1], sys.argv[2]))
