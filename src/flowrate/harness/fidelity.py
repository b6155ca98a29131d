"""Fidelity: does training still converge? The check run apart from throughput.

A check trains the problem for a fixed number of steps on a learnable synthetic task made for it
(Problem.learnable_batch: class clusters, a bigram-and-copy language) and records the loss
reached and the steps it took. Comparing two checks shows whether a precision or an execution
mode hurts convergence; the loss reached can serve as the fidelity objective of a Pareto frontier.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import statistics
from typing import Any

from flowrate.config import Mode, RunConfig
from flowrate.errors import ConfigError, FlowrateError
from flowrate.harness.api import run_config
from flowrate.harness.fidelity_infer import train_then_quantize
from flowrate.problems.base import Problem
from flowrate.problems.registry import get_problem
from flowrate.results.schema import Result
from flowrate.results.sections import Fidelity, Kind

# `fell`: the loss fell when initial − final exceeds both FELL_SIGMAS standard errors of that
# difference (the two windows' step-to-step scatter, so a noisy flat curve does not count) and
# FELL_MIN_FRACTION of the initial loss (so a tiny but noiseless drift does not count either).
FELL_SIGMAS = 3.0
FELL_MIN_FRACTION = 0.05
# `comparable`: two checks reached comparable losses when their final losses differ by at most
# this share of the larger fall (initial − final) of the two. Scale-free, so it holds as well for
# a task whose floor is 0 as for one whose floor is 0.35; 0.1 means "got 90% as far". On the
# debug sizes on the CPU, bf16 autocast lands within 0.01% of fp32's fall (tests/unit/test_fidelity.py).
COMPARABLE_TOLERANCE = 0.1

# First among a check's warnings (the harness gives a check no timing advice: it is moot there).
THROUGHPUT_WARNING = (
    "a check run is not a throughput benchmark: its batches are made inside the timed loop; "
    "measure throughput with `flowrate run`"
)


def default_window(steps: int) -> int:
    """Steps averaged for the initial and final loss: 10% of the steps, at least 1."""
    return max(1, steps // 10)


def summarize_fidelity(
    losses: list[float], *, window: int | None = None, target_loss: float | None = None
) -> dict[str, Any]:
    """The fidelity record of one loss curve (per-step losses in order).

    initial_loss / final_loss: means of the first / last ``window`` steps (default 10% of the
    steps, at least 1, at most all); final_loss is "the loss reached". min_loss: the lowest
    single step. steps_to_target: the first step (counted from 1) at which the mean of the
    ``window`` losses ending there is at or below ``target_loss``; None when it never is or no
    target is given. relative_drop: (initial − final) / initial. drop_standard_error and fell:
    see FELL_SIGMAS. task: None here; run_check fills in the problem's description (and
    preheat_steps, the training steps before the recorded curve).
    """
    steps = len(losses)
    if steps == 0:
        raise FlowrateError("no losses to summarize: the check ran no steps")
    if window is None:
        window = default_window(steps)
    elif isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ConfigError("window", f"must be a positive integer, got {window!r}")
    window = min(window, steps)
    first, last = losses[:window], losses[-window:]
    initial = statistics.fmean(first)
    final = statistics.fmean(last)
    drop = initial - final
    noise = _standard_error(first, last)
    margin = max(FELL_SIGMAS * noise, FELL_MIN_FRACTION * abs(initial))
    return {
        "task": None,
        "steps": steps,
        "window": window,
        "initial_loss": initial,
        "final_loss": final,
        "min_loss": min(losses),
        "target_loss": target_loss,
        "steps_to_target": None if target_loss is None else _steps_to(losses, window, target_loss),
        "relative_drop": drop / initial if initial else None,
        "drop_standard_error": noise,
        "fell": drop > margin,
    }


def _standard_error(first: list[float], last: list[float]) -> float:
    """Standard error of mean(first) − mean(last) from each window's scatter; 0 for 1-step windows."""
    if len(first) < 2:
        return 0.0
    return math.sqrt((statistics.variance(first) + statistics.variance(last)) / len(first))


def _steps_to(losses: list[float], window: int, target: float) -> int | None:
    running = sum(losses[:window])
    if running / window <= target:
        return window
    for i in range(window, len(losses)):
        running += losses[i] - losses[i - window]
        if running / window <= target:
            return i + 1
    return None


def comparable(a: Fidelity, b: Fidelity, tolerance: float = COMPARABLE_TOLERANCE) -> bool:
    """Whether two fidelity records reached comparable losses (see COMPARABLE_TOLERANCE).

    False when neither fell: two curves that did not train say nothing about each other.
    """
    if None in (a.initial_loss, a.final_loss, b.initial_loss, b.final_loss):
        return False
    assert a.initial_loss is not None and a.final_loss is not None  # for mypy: checked above
    assert b.initial_loss is not None and b.final_loss is not None
    fall = max(a.initial_loss - a.final_loss, b.initial_loss - b.final_loss)
    if fall <= 0:
        return False
    return abs(a.final_loss - b.final_loss) <= tolerance * fall


def has_learnable_task(problem: Problem) -> bool:
    return type(problem).learnable_batch is not Problem.learnable_batch


def task_description(problem: Problem) -> str:
    """The first line of the problem's learnable_batch docstring: what the task is, and its floor."""
    doc = type(problem).learnable_batch.__doc__  # not inspect.getdoc: it would inherit Problem's
    if not doc or not doc.strip():
        return f"{problem.name}: its own learnable task"
    return inspect.cleandoc(doc).splitlines()[0].strip()


def require_checkable(config: RunConfig, problem: Problem) -> RunConfig:
    """``config`` with its mode settled to train; ConfigError when the problem cannot be checked."""
    if Mode.TRAIN not in problem.modes:
        raise ConfigError(
            "problem",
            f"{problem.name} is forward-only and a check trains; check a model problem (see `flowrate list`)",
        )
    if not has_learnable_task(problem):
        raise ConfigError(
            "problem",
            f"{problem.name} ({type(problem).__name__}) has no learnable task for `flowrate check`: "
            "implement Problem.learnable_batch(batch_size, device, generator)",
        )
    if config.precision.inference_only:  # trained in fp32, then evaluated quantized: see check_inference
        return config.for_problem(problem.modes, Mode.INFER, problem.name)
    if config.mode is Mode.INFER:
        raise ConfigError("mode", "a check trains the model to see its loss fall; use --mode train")
    return config.for_problem(problem.modes, Mode.TRAIN, problem.name)


def run_check(
    config: RunConfig,
    problem: Problem | None = None,
    *,
    target_loss: float | None = None,
    argv: list[str] | None = None,
) -> Result:
    """Train ``config``'s problem on its learnable task; return the Result with ``fidelity`` set.

    Every step, preheat included, gets a fresh batch; the preheat steps train too but their
    losses are not recorded, so give ``preheat_steps=0`` to see the whole curve (the CLI does).
    """
    if target_loss is not None and not math.isfinite(target_loss):
        raise ConfigError("target_loss", f"must be a finite number, got {target_loss!r}")
    if problem is None:
        problem = get_problem(config.problem, config.size, config.problem_options)
    config = require_checkable(config, problem)
    if config.precision.inference_only:
        return _check_inference_format(config, problem, target_loss, argv)
    result = run_config(config, problem, argv=argv, data="learnable")
    fidelity = summarize_fidelity(result.losses, target_loss=target_loss)
    fidelity["task"] = task_description(problem)
    fidelity["preheat_steps"] = config.preheat_steps
    return dataclasses.replace(
        result,
        fidelity=Fidelity(**fidelity),
        kind=Kind.CHECK,
        warnings=[THROUGHPUT_WARNING, *result.warnings],
    )


def _check_inference_format(
    config: RunConfig, problem: Problem, target_loss: float | None, argv: list[str] | None
) -> Result:
    """An inference format's check (flowrate.harness.fidelity_infer): the fp32 training curve's
    record, with final_loss the trained model's mean held-out loss in the format and
    reference_loss the same model's in fp32 on the same batches. The Result is the format's
    held-out inference run."""
    check = train_then_quantize(config, problem, argv)
    fidelity = summarize_fidelity(check.training.losses, target_loss=target_loss)
    reference, quantized = statistics.fmean(check.reference.losses), statistics.fmean(check.quantized.losses)
    fidelity.update(
        task=task_description(problem),
        preheat_steps=config.preheat_steps,
        trained_in="fp32",
        trained_final_loss=fidelity["final_loss"],
        eval_steps=len(check.quantized.losses),
        reference_loss=reference,
        final_loss=quantized,
        loss_increase=quantized - reference,
    )
    return dataclasses.replace(
        check.quantized,
        fidelity=Fidelity(**fidelity),
        kind=Kind.CHECK,
        warnings=[THROUGHPUT_WARNING, *check.quantized.warnings],
    )
