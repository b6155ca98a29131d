"""Weight streaming finds an hf: model's blocks by itself and computes the resident step."""

from __future__ import annotations

import pytest
import torch
from streaming_pair import train_both

from flowrate.config import Precision
from flowrate.problems.registry import get_problem

pytest.importorskip("transformers")

STEPS = 3


def _train_both(precision: Precision, **options: int | str) -> tuple[list[float], list[float], dict, dict]:  # type: ignore[type-arg]
    problem = get_problem("hf:llama", options={"num_hidden_layers": 2, **options})
    theirs, ours, resident, streamed = train_both(problem, precision, STEPS)
    with streamed.master_weights() as model:
        streamed_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    report = streamed.report()
    streamed.finish()
    assert report is not None and report.blocks == 5  # embeddings, 2 decoder layers, final norm, LM head
    return theirs, ours, dict(resident.model.state_dict()), streamed_weights


def test_streaming_a_tiny_llama_computes_the_resident_step_in_fp32() -> None:
    theirs, ours, resident_weights, streamed_weights = _train_both(Precision.FP32)
    assert ours == theirs and theirs[-1] < theirs[0]
    for key, expected in resident_weights.items():
        assert torch.equal(streamed_weights[key], expected), key


def test_streaming_a_tied_head_declares_the_embedding_for_the_last_block() -> None:
    theirs, ours, resident_weights, streamed_weights = _train_both(Precision.FP32, tie_word_embeddings="true")
    assert ours == theirs
    assert torch.equal(
        streamed_weights["model.embed_tokens.weight"], resident_weights["model.embed_tokens.weight"]
    )


def test_streaming_a_tiny_llama_in_bf16_matches_resident() -> None:
    theirs, ours, *_ = _train_both(Precision.BF16)
    assert max(abs(a - b) / abs(a) for a, b in zip(theirs, ours, strict=True)) <= 1e-4
