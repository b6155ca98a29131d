"""One output count per request (serving.usage): the server's usage cross-checked against the
stream at each bound, the stream's own count otherwise, placed on the chunks (serving.tokens)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flowrate.results.serving import Chunk, RequestTrace
from flowrate.results.serving_metrics import apportion, place
from flowrate.serving.prompts import LocalTokenizer
from flowrate.serving.usage import finish, settle
from serving_factories import word_tokenizer


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> LocalTokenizer:
    return word_tokenizer(tmp_path_factory.mktemp("tok"))


def _trace(chunks: int, said: Any, max_tokens: int = 128) -> RequestTrace:
    trace = RequestTrace(0, 0.0, max_tokens=max_tokens, end_s=1.0, status=200)
    trace.chunks = [Chunk(0.1 * i, "w", None) for i in range(chunks)] + [Chunk(0.9, "", None)]
    trace.usage_completion_tokens = said
    return trace


def _texts(*texts: str, said: Any = None) -> RequestTrace:
    trace = RequestTrace(0, 0.0, max_tokens=128, end_s=1.0, status=200)
    trace.chunks = [Chunk(0.1 * (i + 1), text, None) for i, text in enumerate(texts)]
    trace.usage_completion_tokens = said
    return trace


@pytest.mark.parametrize(
    ("chunks", "said", "kept"),
    [
        (8, 8, True),
        (8, 4, True),  # ceil(8 / 2): a token's text split over two chunks
        (8, 3, False),
        (8, 128, True),  # 16 a chunk, and max_tokens
        (4, 65, False),  # above 4 x 16
        (8, 129, False),  # above max_tokens
        (8, 1000, False),
        (40, 2, False),
        (3, 0, False),
        (3, -5, False),
        (3, "lots", False),
        (3, True, False),
        (3, 2.0, False),
    ],
)
def test_usage_is_kept_only_within_the_bounds(chunks: int, said: Any, kept: bool) -> None:
    trace = _trace(chunks, said)
    settle(trace)
    assert trace.token_count_source == ("usage" if kept else "chunks")
    assert trace.usage_completion_tokens == (said if kept else None)
    assert trace.output_tokens == (said if kept else chunks)
    assert (trace.usage_disagreement is None) == kept
    assert sum(c.tokens or 0 for c in trace.chunks) == trace.output_tokens


SENTENCE = ("the quick brown fox jumps over a lazy dog",)  # 1 chunk, 9 tokens: usage 3..37
SPLIT = ("the qu", "ick", " fox")  # 3 chunks (usage 2..48), 3 tokens: usage 1..13


@pytest.mark.parametrize(
    ("texts", "said", "why"),
    [
        (SPLIT, 3, None),
        (SPLIT, 13, None),
        (SPLIT, 14, "14 for text the tokenizer counts as 3 tokens (outside 1..13)"),
        (SENTENCE, 3, None),
        (SENTENCE, 2, "2 for text the tokenizer counts as 9 tokens (outside 3..37)"),
        (SENTENCE, 16, None),
        (SENTENCE, 17, "17 for 1 chunks with text (outside 1..16)"),  # the chunks' bound first
    ],
)
def test_with_a_tokenizer_usage_must_also_agree_with_its_count(
    tokenizer: LocalTokenizer, texts: tuple[str, ...], said: int, why: str | None
) -> None:
    trace = _texts(*texts, said=said)
    settle(trace, tokenizer)
    counted = len(tokenizer.encode("".join(texts)))
    assert trace.token_count_source == ("usage" if why is None else "tokenizer")
    assert trace.output_tokens == (said if why is None else counted)
    assert trace.usage_disagreement == (None if why is None else f"usage.completion_tokens {why}")


def test_the_whole_text_is_tokenized_once_not_each_chunk(tokenizer: LocalTokenizer) -> None:
    """The chunks "the qu", "ick", " fox" say "the quick fox": 3 tokens. Each tokenized alone would
    give 2 + 1 + 1 = 4 (the boundary inside "quick" counted twice)."""
    assert [len(tokenizer.encode(t)) for t in ("the qu", "ick", " fox")] == [2, 1, 1]
    trace = _texts("the qu", "ick", " fox")
    settle(trace, tokenizer)
    assert trace.output_tokens == 3 and trace.token_count_source == "tokenizer"
    assert [c.tokens for c in trace.chunks] == [2, 0, 1]  # "quick" starts in the first chunk


def test_usage_is_placed_on_the_chunks_in_proportion_and_sums_to_it(tokenizer: LocalTokenizer) -> None:
    trace = _texts("the quick", "", " brown fox jumps", " over", said=12)
    settle(trace, tokenizer)  # tokenizer: 2, 0, 3, 1 (6 tokens); usage 12 is within 2..25
    assert trace.output_tokens == 12 and trace.token_count_source == "usage"
    assert [c.tokens for c in trace.chunks] == [4, 0, 6, 2]
    without = _texts("ab", "", "cd", "ef", said=4)  # one a chunk with text: 3 chunks, 4 tokens
    settle(without)
    assert [c.tokens for c in without.chunks] == [2, 0, 1, 1]  # ceil(4/3)=2, ceil(8/3)=3, 4


def test_tokens_are_placed_cumulatively_rounded_up_and_the_last_with_the_last_chunk() -> None:
    assert apportion([1, 1, 1], 3) == [1, 1, 1]
    assert apportion([1, 1, 1, 1], 2) == [1, 0, 1, 0]  # ceil(0.5)=1, ceil(1)=1, ceil(1.5)=2, 2
    assert apportion([0, 2, 0, 1], 6) == [0, 4, 0, 2]
    assert apportion([3, 1], 0) == [0, 0]
    assert apportion([0, 0], 0) == [0, 0]
    assert place([1, 1, 1, 1], 2) == [1, 0, 0, 1]
    assert place([3, 0], 3) == [2, 1] and place([1, 0], 1) == [1, 0]  # one token: the first


def test_no_usage_counts_the_stream_and_a_finished_trace_is_storable() -> None:
    trace = _trace(2, None)
    trace.usage_prompt_tokens = -3
    trace.chunks[0].text = "\udcff"  # a lone surrogate, as JSON's "\udcff" gives one
    finish(trace)
    assert trace.token_count_source == "chunks" and trace.usage_disagreement is None
    assert trace.output_tokens == 2 and [c.tokens for c in trace.chunks] == [1, 0, 1]  # last: the end
    assert trace.usage_prompt_tokens is None and trace.chunks[0].text == "?"


def test_a_stream_without_text_counts_nothing(tmp_path: Path) -> None:
    trace = _texts("", "", said=16)  # an honest server whose 16 bytes never made a character
    settle(trace)
    assert trace.output_tokens == 0 and trace.usage_disagreement is not None
    assert [c.tokens for c in trace.chunks] == [0, 0]
