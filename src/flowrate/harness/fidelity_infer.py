"""The fidelity of an inference format (int8-weights, int8-dynamic): what quantizing costs a
trained model.

A quantized format cannot train, so its check trains the model in fp32 on the problem's
learnable task (the same curve a fp32 check records), then runs the trained weights forward on
EVAL_STEPS fresh batches twice, as they are (fp32) and quantized, on the same batches. The loss
reached by the format is the quantized model's mean loss there, beside the fp32 model's on the
same batches: their difference is the format's cost, free of training noise.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from torch import nn

from flowrate.config import Mode, Precision, RunConfig
from flowrate.harness.api import run_config
from flowrate.problems.base import Problem
from flowrate.results.schema import Result

# Held-out batches each model is evaluated on: enough that the mean loss is steady on the debug
# sizes, few enough that a check stays a training run plus a few seconds.
EVAL_STEPS = 20


@dataclass(frozen=True)
class InferenceCheck:
    training: Result  # the fp32 training run: its losses are the curve
    reference: Result  # the trained fp32 model forward on the held-out batches
    quantized: Result  # the same model in the format, forward on the same batches


def train_then_quantize(config: RunConfig, problem: Problem, argv: list[str] | None) -> InferenceCheck:
    """Train ``problem`` in fp32 under ``config``'s loop settings, then evaluate the trained weights
    in fp32 and in ``config.precision`` on the same fresh batches (seed + 1: unseen in training)."""
    trained: list[nn.Module] = []
    capture = copy.copy(problem)

    def build_and_keep() -> nn.Module:
        trained.append(problem.build_model())
        return trained[-1]

    capture.build_model = build_and_keep  # type: ignore[method-assign]
    training_config = config.replace(precision=Precision.FP32, mode=Mode.TRAIN)
    training = run_config(training_config, capture, argv=argv, data="learnable")

    replay = copy.copy(problem)
    replay.build_model = lambda: copy.deepcopy(trained[-1])  # type: ignore[method-assign]
    evaluation = config.replace(
        mode=Mode.INFER,
        steps=EVAL_STEPS,
        preheat_steps=0,
        seed=config.seed + 1,
        batch_size=training.batch_size,
    )
    reference = run_config(evaluation.replace(precision=Precision.FP32), replay, argv=argv, data="learnable")
    quantized = run_config(evaluation, replay, argv=argv, data="learnable")
    return InferenceCheck(training, reference, quantized)
