"""What a finished trace may keep of what the server said: its `usage` cross-checked against the
stream, and text that can be stored.

A server's usage.completion_tokens is the exact output length when it is honest, so it is used
when it agrees with the stream; when it does not, the stream's own count is used instead and the
trace says why (``usage_disagreement``). It agrees when it is an integer with

    1 <= usage <= max_tokens   and   ceil(chunks / 2) <= usage <= chunks * 16

with ``chunks`` the chunks that carried text. The lower bound: every chunk with text carries at
least one new token (a server streams a chunk per decoding step that produced text), and the
halving leaves room for a server that splits one token's text over two chunks (a multi-byte
character sent in pieces). The upper bound: one chunk carries the tokens of one or more decoding
steps (vLLM's stream interval, speculative decoding's accepted drafts, a server's own buffering);
16 tokens a chunk is above what those produce, so only a count that no stream could carry is
refused.
"""

from __future__ import annotations

import math

from flowrate.serving.trace import RequestTrace

CHUNK_SPLIT = 2  # a token's text may arrive in this many chunks
TOKENS_PER_CHUNK = 16  # a chunk may carry at most this many tokens


def _count(value: object) -> int | None:
    """An integer >= 0 as JSON gives one, else None."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def reconcile(trace: RequestTrace) -> None:
    """Keep the server's completion count only when it agrees with the stream (the module's
    bounds), set ``token_count_source`` and, on disagreement, ``usage_disagreement``."""
    said = trace.usage_completion_tokens
    trace.usage_prompt_tokens = _count(trace.usage_prompt_tokens)
    if said is None:
        trace.usage_completion_tokens = None
        trace.token_count_source = "stream"
        return
    chunks = sum(1 for c in trace.chunks if c.text)
    low, high = math.ceil(chunks / CHUNK_SPLIT), chunks * TOKENS_PER_CHUNK
    problem = None
    if _count(said) is None:
        problem = f"usage.completion_tokens {repr(said)[:40]} is not an integer >= 0"
    elif not 1 <= said <= trace.max_tokens:
        problem = f"usage.completion_tokens {said} is outside 1..max_tokens {trace.max_tokens}"
    elif not low <= said <= high:
        problem = f"usage.completion_tokens {said} for {chunks} chunks with text (outside {low}..{high})"
    if problem is None:
        trace.token_count_source = "usage"
        return
    trace.usage_completion_tokens = None
    trace.token_count_source = "stream"
    trace.usage_disagreement = problem


def storable(text: str) -> str:
    """``text`` as valid Unicode: a lone surrogate (JSON's "\\udcff") becomes "?"."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", errors="replace").decode("utf-8")
    return text


def finish(trace: RequestTrace) -> None:
    """Make a finished trace storable: its usage cross-checked, its texts valid Unicode."""
    if trace.ok:
        reconcile(trace)
    else:
        trace.usage_completion_tokens = _count(trace.usage_completion_tokens)
        trace.usage_prompt_tokens = _count(trace.usage_prompt_tokens)
    for chunk in trace.chunks:
        chunk.text = storable(chunk.text)
    if trace.error is not None:
        trace.error = storable(trace.error)
