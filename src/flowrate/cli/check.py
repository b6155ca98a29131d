"""`flowrate check`: train on a learnable task and report whether, and how far, the loss fell.

Takes every `flowrate run` option; only the defaults that shape a loss curve differ: a fixed
number of steps and no preheat, so the whole curve is recorded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from flowrate.cli.run import Destination, output_options, resolve_run, run_options, span

if TYPE_CHECKING:
    from flowrate.results.schema import Result

# Steps a check trains when the user sets no length (--steps, --min-steps or --duration).
CHECK_STEPS = 300


@click.command("check")
@run_options
@click.option(
    "--target-loss",
    type=float,
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

    from flowrate.cli import console
    from flowrate.errors import FlowrateError
    from flowrate.harness.fidelity import require_checkable, run_check
    from flowrate.units import count

    if flags["steps"] is None and flags["min_steps"] is None and flags["duration_s"] is None:
        flags["steps"] = CHECK_STEPS
    if flags["preheat_steps"] is None:
        flags["preheat_steps"] = 0
    config, problem = resolve_run(flags, sample_shape, out, require_checkable)
    destination = Destination.open(store, tags, no_store, out, quiet, as_json)
    console.status(
        f"flowrate check: {problem.name}/{problem.size} ({count(problem.parameter_count())} parameters) "
        f"{config.precision.value}, lr {config.learning_rate:g}: "
        f"training {span(config)} on its learnable task",
        quiet,
    )
    result = run_check(config, problem, target_loss=target_loss, argv=sys.argv)
    destination.report(result, f"flowrate check {result.run_id}", fidelity_rows(result))
    fidelity = result.fidelity or {}
    if not fidelity.get("fell"):
        raise FlowrateError(
            f"the loss did not fall: {fidelity.get('initial_loss', float('nan')):.4f} -> "
            f"{fidelity.get('final_loss', float('nan')):.4f} over {fidelity.get('steps', 0)} steps; "
            "train longer (--steps) or with a higher --lr"
        )


def fidelity_rows(result: Result) -> list[tuple[str, str]]:
    """The human summary of a check, as (label, value) rows."""
    from flowrate.units import count

    f = result.fidelity or {}
    c = result.config
    p = result.problem
    device = result.environment.get("device", {}).get("name") or c["device"]
    window = f"{f['window']} step" + ("s" if f["window"] != 1 else "")
    preheat = f", after {f['preheat_steps']} unrecorded preheat steps" if f.get("preheat_steps") else ""
    rows = [
        ("problem", f"{p['name']}/{p['size']}  ({count(p['parameters'])} parameters)"),
        (
            "run",
            f"{c['precision']}  batch {result.batch_size}  {c['optimizer']} lr {c['learning_rate']:g}  "
            f"{c['execution']}",
        ),
        ("device", str(device)),
        ("task", str(f.get("task"))),
        ("steps", f"{f['steps']}{preheat}"),
        ("initial loss", f"{f['initial_loss']:.4f}  (mean of the first {window})"),
        ("loss reached", f"{f['final_loss']:.4f}  (mean of the last {window})"),
        ("min loss", f"{f['min_loss']:.4f}"),
    ]
    if f.get("target_loss") is not None:
        reached = f["steps_to_target"]
        rows.append(
            (
                "steps to target",
                f"{reached if reached is not None else 'not reached'}  (target {f['target_loss']:g})",
            )
        )
    drop = f.get("relative_drop")
    change = f"  ({-drop:+.1%})" if drop is not None else ""
    rows.append(("fell", ("yes" if f["fell"] else "no") + change))
    return rows
