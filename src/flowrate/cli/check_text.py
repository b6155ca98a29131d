"""`flowrate check` as text: what is about to train, and whether and how far the loss fell.

Pure: a config or a Result in, lines or rows out.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from flowrate.cli.run_text import problem_words, span
from flowrate.config import RunConfig
from flowrate.results.sections import Fidelity
from flowrate.units import count

if TYPE_CHECKING:
    from flowrate.config import RunConfig
    from flowrate.problems.base import Problem
    from flowrate.results.schema import Result


def start_line(config: RunConfig, problem: Problem) -> str:
    return (
        f"flowrate check: {problem_words(problem)} "
        f"{config.precision.value}, lr {config.learning_rate:g}: "
        f"training {span(config)} on its learnable task"
    )


def did_not_fall(result: Result) -> str:
    """The check failed: the loss at both ends, and what to try."""
    fidelity = result.fidelity or Fidelity()
    initial, final = fidelity.initial_loss, fidelity.final_loss
    return (
        f"the loss did not fall: {initial if initial is not None else math.nan:.4f} -> "
        f"{final if final is not None else math.nan:.4f} over {fidelity.steps} steps; "
        "train longer (--steps) or with a higher --lr"
    )


def fidelity_rows(result: Result) -> list[tuple[str, str]]:
    """The human summary of a check, as (label, value) rows."""
    f = result.fidelity
    if f is None:
        raise ValueError(f"run {result.run_id} is not a check: it has no fidelity section")
    c = result.config
    if not isinstance(c, RunConfig):
        raise ValueError(f"run {result.run_id} is not a check: its configuration is a {result.kind}'s")
    p = result.problem
    device = result.environment.device_name or c.device
    preheat = f", after {f.preheat_steps} unrecorded preheat steps" if f.preheat_steps else ""
    drop = f.relative_drop
    change = f"  ({-drop:+.1%})" if drop is not None else ""
    return [
        ("problem", f"{p.name}/{p.size}  ({count(p.parameters)} parameters)"),
        (
            "run",
            f"{c.precision}  batch {result.batch_size}  {c.optimizer} lr {c.learning_rate:g}  {c.execution}",
        ),
        ("device", str(device)),
        ("task", str(f.task)),
        ("steps", f"{f.steps}{preheat}"),
        *_loss_rows(f, c),
        *_target_rows(f),
        ("fell", ("yes" if f.fell else "no") + change),
    ]


def _loss_rows(f: Fidelity, c: RunConfig) -> list[tuple[str, str]]:
    """Where the loss started, where it got to and its minimum; for an inference format (trained
    in fp32, then quantized) the fp32 training's ends and the quantized loss beside fp32's."""
    window = f"{f.window} step" + ("s" if f.window != 1 else "")
    lowest = ("min loss", f"{f.min_loss:.4f}")
    if f.reference_loss is None:
        return [
            ("initial loss", f"{f.initial_loss:.4f}  (mean of the first {window})"),
            ("loss reached", f"{f.final_loss:.4f}  (mean of the last {window})"),
            lowest,
        ]
    return [
        ("initial loss", f"{f.initial_loss:.4f}  (fp32 training, mean of the first {window})"),
        ("trained to", f"{f.trained_final_loss:.4f}  (fp32 training, mean of the last {window})"),
        (
            "loss reached",
            f"{f.final_loss:.4f} in {c.precision}, {f.reference_loss:.4f} in fp32  "
            f"(same {f.eval_steps} held-out batches; {f.loss_increase:+.4f})",
        ),
        lowest,
    ]


def _target_rows(f: Fidelity) -> list[tuple[str, str]]:
    """With --target-loss: the steps it took to reach it."""
    if f.target_loss is None:
        return []
    reached = f.steps_to_target
    return [
        (
            "steps to target",
            f"{reached if reached is not None else 'not reached'}  (target {f.target_loss:g})",
        )
    ]
