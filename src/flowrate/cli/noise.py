"""`flowrate noise`: how much samples/s varies between runs, per configuration on a machine.

The model is flowrate.results.noise; compare uses it when a side has too few runs of its own.
"""

from __future__ import annotations

import json
from typing import Any

import click

from flowrate.cli.options import selection_options


@click.command("noise")
@selection_options
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON on stdout.")
def command(refs: tuple[str, ...], store: str | None, as_json: bool, **flags: Any) -> None:
    """Show the noise the store knows: per configuration on a machine, the runs, the between-run
    CV, the within-run CV and the intraclass correlation (all recorded runs, those named, or those
    the filters match).

    A configuration is the problem (name, size, mode, shape), batch size, precision, execution,
    optimizer, device and threads; a machine its host name, device, CPU and thread count. Each
    run — each repeat of a --repeat run — is one value, its median samples/s.
    """
    from flowrate.cli import console, noise_text
    from flowrate.cli.select import pop_filter, select_runs
    from flowrate.results.noise import noise_table, sessions_of

    runs = select_runs(store, refs, pop_filter(flags))
    table = noise_table((run.result for run in runs), sessions_of(runs))
    if as_json:
        console.data(json.dumps(noise_text.to_json(table), indent=2))
        return
    title = f"Noise between runs: {len(table)} configuration(s), {len(runs)} recorded run(s)"
    console.grid(title, noise_text.HEADER, noise_text.rows(table), right_aligned=noise_text.RIGHT_ALIGNED)
    console.status(noise_text.LEGEND)
