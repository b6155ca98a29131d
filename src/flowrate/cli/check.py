"""`flowrate check`: train on a learnable task and report whether, and how far, the loss fell.

Takes every `flowrate run` option; only the defaults that shape a loss curve differ: a fixed
number of steps and no preheat, so the whole curve is recorded.
"""

from __future__ import annotations

from typing import Any

import click

from flowrate.cli.options import output_options, run_options
from flowrate.cli.param_types import FiniteRange
from flowrate.config import CHECK_STEPS


@click.command("check")
@run_options
@click.option(
    "--target-loss",
    type=FiniteRange(),
    help="Also report the first step at which the loss (a running mean over 10% of the steps) "
    "reaches this value.",
)
@output_options
def command(
    store: str | None,
    tags: tuple[str, ...],
    no_store: bool,
    as_json: bool,
    out: str | None,
    quiet: bool,
    target_loss: float | None,
    sample_shape: int | None,
    **flags: Any,
) -> None:
    """Check that training converges: train on a learnable synthetic task, report the loss reached.

    The task is made for the problem (class clusters for classifiers, a bigram-and-copy
    language for language models), so its loss really falls when training works: compare
    checks to see whether a precision or an execution mode hurts convergence. Runs 300 steps
    with no preheat unless --steps (or --min-steps / --duration) and --preheat say otherwise;
    the debug sizes converge visibly with --lr 1e-3. The throughput of a check is not a
    benchmark: its batches are made inside the timed loop.

    Exit codes: 0 the loss fell; 1 it did not fall (or the run failed); 2 bad input, including a
    problem with no learnable task.
    """
    import sys

    from flowrate.cli import check_text, console
    from flowrate.cli.destination import Destination
    from flowrate.cli.resolve import resolve_run
    from flowrate.errors import RunFailed
    from flowrate.harness.fidelity import require_checkable, run_check

    if flags["steps"] is None and flags["min_steps"] is None and flags["duration_s"] is None:
        flags["steps"] = CHECK_STEPS
    if flags["preheat_steps"] is None:
        flags["preheat_steps"] = 0
    config, problem = resolve_run(flags, sample_shape, out, require_checkable)
    destination = Destination.open(store, tags, no_store, out, quiet, as_json)
    console.status(check_text.start_line(config, problem), quiet)
    result = run_check(config, problem, target_loss=target_loss, argv=sys.argv)
    destination.report(result, f"flowrate check {result.run_id}", check_text.fidelity_rows(result))
    if result.fidelity is None or not result.fidelity.fell:
        raise RunFailed(check_text.did_not_fall(result))
