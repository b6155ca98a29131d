"""A finished request's one output count, cross-checked, and text that can be stored.

The count. A server's usage.completion_tokens is the exact output length when it is honest, so it
is the count when it agrees with the stream; when it does not, the stream's own count is used
instead (the local tokenizer's count of the whole output text when one is given, else the chunks
that carried text) and the trace says why (``usage_disagreement``). It agrees when it is an
integer with

    1 <= usage <= max_tokens   and   ceil(chunks / 2) <= usage <= chunks * 16

with ``chunks`` the chunks that carried text, and, with a tokenizer that counted ``t`` tokens,

    ceil(t / 4) <= usage <= 4 * t + 1

The chunk bounds: every chunk with text carries at least one new token (a server streams a chunk
per decoding step that produced text), and the halving leaves room for a server that splits one
token's text over two chunks (a multi-byte character sent in pieces); one chunk carries the
tokens of one or more decoding steps (vLLM's stream interval, speculative decoding's accepted
drafts, a server's own buffering), and 16 a chunk is above what those produce. The tokenizer
bounds: re-encoding the decoded text may split what the model generated (a byte that is no whole
character decodes to U+FFFD, which a byte-level vocabulary re-encodes as three tokens) or merge
it (a word generated piece by piece re-encodes whole), each by a factor under 4; the one is an
end-of-sequence token the server counts and the text does not show. So only a count that no
stream of this text could carry is refused.

The count is then placed on the chunks (serving.tokens), so every definition in serving.metrics
reads the same n tokens at the same arrivals.
"""

from __future__ import annotations

import math

from flowrate.results.serving import RequestTrace
from flowrate.results.serving_metrics import place
from flowrate.serving import tokens
from flowrate.serving.prompts import LocalTokenizer

CHUNK_SPLIT = 2  # a token's text may arrive in this many chunks
TOKENS_PER_CHUNK = 16  # a chunk may carry at most this many tokens
RETOKENIZED = 4  # re-encoding the output text changes its count by less than this factor


def _count(value: object) -> int | None:
    """An integer >= 0 as JSON gives one, else None."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _problem(said: object, trace: RequestTrace, chunks: int, counted: int | None) -> str | None:
    """Why the server's completion count cannot be this stream's (the module's bounds), or None."""
    if _count(said) is None:
        return f"usage.completion_tokens {repr(said)[:40]} is not an integer >= 0"
    assert isinstance(said, int)
    if not 1 <= said <= trace.max_tokens:
        return f"usage.completion_tokens {said} is outside 1..max_tokens {trace.max_tokens}"
    low, high = math.ceil(chunks / CHUNK_SPLIT), chunks * TOKENS_PER_CHUNK
    if not low <= said <= high:
        return f"usage.completion_tokens {said} for {chunks} chunks with text (outside {low}..{high})"
    if counted is not None:
        low, high = math.ceil(counted / RETOKENIZED), counted * RETOKENIZED + 1
        if not low <= said <= high:
            return (
                f"usage.completion_tokens {said} for text the tokenizer counts as {counted} tokens "
                f"(outside {low}..{high})"
            )
    return None


def settle(trace: RequestTrace, tokenizer: LocalTokenizer | None = None) -> None:
    """Choose the request's one output count (the module's rule), set ``output_tokens``,
    ``token_count_source`` and, on disagreement, ``usage_disagreement``; place the count on the
    chunks (``Chunk.tokens``, summing to it)."""
    trace.usage_prompt_tokens = _count(trace.usage_prompt_tokens)
    chunks = sum(1 for c in trace.chunks if c.text)
    if tokenizer is None:
        weights, counted, own = tokens.chunk_weights(trace.chunks), None, "chunks"
    else:
        weights = tokens.tokenizer_weights(trace.chunks, tokenizer.starts)
        counted, own = sum(weights), "tokenizer"
    said = trace.usage_completion_tokens
    problem = None if said is None else _problem(said, trace, chunks, counted)
    if said is not None and problem is None:
        assert isinstance(said, int)
        trace.output_tokens, trace.token_count_source = said, "usage"
    else:
        trace.usage_completion_tokens = None
        trace.output_tokens, trace.token_count_source = sum(weights), own
        trace.usage_disagreement = problem
    for chunk, placed in zip(trace.chunks, place(weights, trace.output_tokens), strict=True):
        chunk.tokens = placed


def storable(text: str) -> str:
    """``text`` as valid Unicode: a lone surrogate (JSON's "\\udcff") becomes "?"."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace").decode("utf-8")
    return text


def finish(trace: RequestTrace, tokenizer: LocalTokenizer | None = None) -> None:
    """Make a finished trace storable: a completed request's count settled (``settle``), every
    text valid Unicode. A failed request keeps only the usage counts that are counts."""
    for chunk in trace.chunks:
        chunk.text = storable(chunk.text)
    if trace.ok:
        settle(trace, tokenizer)
    else:
        trace.usage_completion_tokens = _count(trace.usage_completion_tokens)
        trace.usage_prompt_tokens = _count(trace.usage_prompt_tokens)
    if trace.error is not None:
        trace.error = storable(trace.error)
