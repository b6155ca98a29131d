"""`flowrate validate`: check a configuration in seconds, on the meta device, before running it."""

from __future__ import annotations

from typing import Any

import click

from flowrate.cli.options import host_memory_option, run_options, target_option

GIB = 2**30


@click.command("validate")
@run_options
@target_option
@host_memory_option
@click.option("--json", "as_json", is_flag=True, help="Print what was found as JSON on stdout.")
def command(
    target: str | None, host_memory: float | None, as_json: bool, sample_shape: int | None, **flags: Any
) -> None:
    """Check a configuration without running it: every problem found, in seconds.

    The model is built and one step (forward; backward and the optimizer's update for training)
    runs on the meta device, without allocating weights: the shape and option checks, whether
    the device runs the precision, and whether each execution mode's memory fits the device (and
    the host, for streaming). Exit codes: 0 no problem; 1 problems found (each listed); 2 bad input.
    """
    import json
    import sys

    from flowrate.cli import console, validate_text
    from flowrate.cli.resolve import given_fields
    from flowrate.config import FLAG_NAMES
    from flowrate.estimate.validate import validate

    result = validate(
        given_fields(flags, sample_shape),
        target=target,
        host_capacity=host_memory * GIB if host_memory is not None else None,
        flag_names=FLAG_NAMES,
    )
    if as_json:
        console.data(json.dumps(validate_text.validation_json(result), indent=2))
    for finding in result.findings:
        if not finding.error:
            console.warn(finding.message)
    if not result.ok:
        header, *items = validate_text.finding_lines(result)
        console.error(header)
        for item in items:
            console.detail(item)
        sys.exit(1)
    if not as_json:
        console.key_value_table("flowrate validate", validate_text.validation_rows(result))
