"""The task of an hf: model, inferred from its config, and the Problem that runs it.

Causal LM, masked LM, seq2seq LM and sequence classification are here (hf_text.py holds their
batches and losses); image classification runs through vision_tasks.ImageClassificationProblem.
"""

from __future__ import annotations

import enum
from typing import Any

from flowrate.errors import ConfigError
from flowrate.problems.base import Problem
from flowrate.problems.sources.base import SourceSettings


class Task(enum.StrEnum):
    CAUSAL_LM = "causal-lm"
    MASKED_LM = "masked-lm"
    SEQ2SEQ = "seq2seq"
    SEQUENCE_CLASSIFICATION = "sequence-classification"
    IMAGE_CLASSIFICATION = "image-classification"


# transformers' auto-model tables, per task: model type -> model class name
_MAPPINGS = {
    Task.CAUSAL_LM: "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    Task.MASKED_LM: "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    Task.SEQ2SEQ: "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    Task.SEQUENCE_CLASSIFICATION: "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
    Task.IMAGE_CLASSIFICATION: "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
}
# Inference order: an image model classifies; an encoder-decoder is seq2seq; a model with a
# masked-LM head is an encoder (BERT also has a causal-LM class, but pretrains masked); then
# decoders; sequence classification only when nothing else fits (or --hf-config task=…).
_ORDER = (
    Task.IMAGE_CLASSIFICATION,
    Task.SEQ2SEQ,
    Task.MASKED_LM,
    Task.CAUSAL_LM,
    Task.SEQUENCE_CLASSIFICATION,
)


def task_classes(model_type: str) -> dict[Task, str]:
    """The model class name of each task this model type has in transformers."""
    from transformers.models.auto import modeling_auto

    classes = {}
    for task, table in _MAPPINGS.items():
        name = getattr(modeling_auto, table).get(model_type)
        if isinstance(name, tuple | list):
            name = name[0]
        if name:
            classes[task] = name
    return classes


def infer_task(config: Any, given: str | None) -> tuple[Task, str]:
    """The task (given, from a folder's config.architectures, or inferred) and its model class."""
    classes = task_classes(config.model_type)
    if given is not None:
        try:
            task = Task(given.strip().lower())
        except ValueError:
            valid = ", ".join(t.value for t in Task)
            raise ConfigError("hf_config", f"unknown task {given!r}; use one of {valid}") from None
        if task not in classes:
            raise ConfigError(
                "hf_config", f"{config.model_type} has no {task.value} model; its tasks: {_names(classes)}"
            )
        return task, classes[task]
    for architecture in getattr(config, "architectures", None) or ():
        for task, name in classes.items():
            if name == architecture:
                return task, name
    for task in _ORDER:
        if task in classes and (task is not Task.SEQ2SEQ or getattr(config, "is_encoder_decoder", False)):
            return task, classes[task]
    raise ConfigError(
        "problem",
        f"hf:{config.model_type} has none of the tasks flowrate runs ({', '.join(t.value for t in Task)})",
    )


def _names(classes: dict[Task, str]) -> str:
    return ", ".join(t.value for t in classes) or "none flowrate runs"


def make_problem(
    name: str,
    size: str,
    config: Any,
    settings: SourceSettings,
    *,
    task: str | None,
    weights: Any,
    mask_token_id: int | None,
) -> Problem:
    """The Problem running ``config``'s model on its task, with synthetic inputs that follow it."""
    import transformers

    chosen, class_name = infer_task(config, task)
    model_class = getattr(transformers, class_name)
    if chosen is Task.IMAGE_CLASSIFICATION:
        from flowrate.problems.sources.hf_vision import image_problem

        return image_problem(name, size, config, model_class, settings, weights)
    if settings.image_size is not None:
        raise ConfigError("image_size", f"{name} reads tokens: set --seq-len")
    from flowrate.problems.sources import hf_text

    kinds = {
        Task.CAUSAL_LM: hf_text.CausalLM,
        Task.MASKED_LM: hf_text.MaskedLM,
        Task.SEQ2SEQ: hf_text.Seq2SeqLM,
        Task.SEQUENCE_CLASSIFICATION: hf_text.SequenceClassification,
    }
    return kinds[chosen](name, size, config, model_class, settings.seq_len, weights, mask_token_id)
