"""The server's usage cross-checked against the stream (serving.usage), at each bound."""

from __future__ import annotations

from typing import Any

import pytest

from flowrate.serving.trace import Chunk, RequestTrace
from flowrate.serving.usage import finish, reconcile


def _trace(chunks: int, said: Any, max_tokens: int = 128) -> RequestTrace:
    trace = RequestTrace(0, 0.0, max_tokens=max_tokens, end_s=1.0, status=200)
    trace.chunks = [Chunk(0.1 * i, "w", None) for i in range(chunks)] + [Chunk(0.9, "", None)]
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
    reconcile(trace)
    assert trace.token_count_source == ("usage" if kept else "stream")
    assert trace.usage_completion_tokens == (said if kept else None)
    assert (trace.usage_disagreement is None) == kept


def test_no_usage_counts_the_stream_and_a_finished_trace_is_storable() -> None:
    trace = _trace(2, None)
    trace.usage_prompt_tokens = -3
    trace.chunks[0].text = "\udcff"  # a lone surrogate, as JSON's "\udcff" gives one
    finish(trace)
    assert trace.token_count_source == "stream" and trace.usage_disagreement is None
    assert trace.usage_prompt_tokens is None and trace.chunks[0].text == "?"
