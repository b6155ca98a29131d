"""`flowrate validate` as text: what was found, or the summary of a configuration that passed,
and the same as JSON.

Pure: a Validation in, lines, rows or a JSON object out.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from flowrate.units import count, counted, gib

if TYPE_CHECKING:
    from flowrate.estimate.validate import Validation


def describe_run(validation: Validation) -> str:
    """'transformer/debug train fp32 batch 4 on AMD EPYC 7B13', as far as it is known."""
    config, problem = validation.config, validation.problem
    if config is None or problem is None:
        return config.problem if config is not None else "the configuration"
    batch = f"batch {validation.batch_size}" + (
        " (auto: checked at the default)" if config.batch_size == "auto" else ""
    )
    where = f" on {validation.device}" if validation.device else ""
    return (
        f"{problem.name}/{problem.size} {config.settled_mode.value} {config.precision.value} {batch}{where}"
    )


def finding_lines(validation: Validation) -> list[str]:
    errors = [f for f in validation.findings if f.error]
    what = "problem" if len(errors) == 1 else "problems"
    lines = [f"flowrate validate: {describe_run(validation)}: {len(errors)} {what}"]
    lines += [f"  {i}. {finding.message}" for i, finding in enumerate(errors, 1)]
    return lines


def validation_rows(validation: Validation) -> list[tuple[str, str]]:
    """The summary of a configuration that passed."""
    trace, plan = validation.trace, validation.plan
    rows = [("validate", f"OK: {describe_run(validation)}")]
    if trace is not None:
        step = (
            "one training step (forward, backward, optimizer)"
            if trace.mode.value == "train"
            else "one forward"
        )
        blocks = counted(len(trace.blocks), "block") if trace.blocks is not None else "no blocks declared"
        rows.append(
            (
                "model",
                f"{count(trace.parameters)} parameters, {blocks}; {step} ran on the meta device "
                f"({trace.kernels()} kernels)",
            )
        )
    if validation.config is not None:
        rows.append(
            ("precision", f"{validation.config.precision.value} runs on {validation.device or 'the device'}")
        )
    if plan is not None:
        for name, need in plan.needs.items():
            if not need.available:
                rows.append((name, f"— ({need.reason})"))
                continue
            text = f"{gib(need.device_bytes)} on the device"
            if need.host_bytes is not None:
                text += f", {gib(need.host_bytes)} on the host"
            if name == plan.chosen:
                fits = ", ".join(
                    f"{f.where} {gib(f.need)} of {gib(f.capacity)}" + (" (tight)" if f.tight else "")
                    for f in plan.fits
                    if f.capacity is not None
                )
                text += f" [chosen; fits: {fits}]" if fits else " [chosen; capacity unknown]"
            rows.append((name, text))
    return rows


def validation_json(validation: Validation) -> dict[str, Any]:
    plan = validation.plan
    return {
        "ok": validation.ok,
        "device": validation.device,
        "batch_size": validation.batch_size,
        "findings": [asdict(f) for f in validation.findings],
        "memory": None
        if plan is None
        else {
            "chosen": plan.chosen,
            "needs": {name: asdict(need) for name, need in plan.needs.items()},
            "fits": [
                {"where": f.where, "need": f.need, "capacity": f.capacity, "fits": f.fits} for f in plan.fits
            ],
        },
    }
