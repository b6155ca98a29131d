"""Where a request's tokens arrived: its one output count placed on the chunks that carried them.

A request has one output count n (usage.py chooses it: the server's usage when it agrees with the
stream, else the stream's own count). The stream's chunks give each token's arrival only roughly:
a chunk may carry several tokens, or part of one. Each chunk has a weight w_i: with a local
tokenizer, the tokens of the *concatenated* output text (tokenized once, so no token is counted
twice at a chunk boundary) that start in that chunk's text; without one, 1 for a chunk with text.
The n tokens are then placed so that by the end of chunk i

    ceil(n * (w_1 + ... + w_i) / (w_1 + ... + w_all))

have arrived: the per-chunk counts sum to exactly n, the first chunk with weight carries at least
one token (a token has arrived once any part of it has), and when n is the weights' total each
chunk carries its own weight. Then the last token is taken to arrive with the stream's last chunk
when that chunk got none (n >= 2; one token moves there from the last chunk that had any): a
server ends a stream with a chunk right after its last token (its finish chunk, often without
text), and tokens whose bytes never made a whole character show no text at all, so generation
ends with the last chunk, not with the last text.

This module gives the weights; the placing (apportion, place) is in flowrate.results.serving_metrics,
beside the metrics that read it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

from flowrate.results.serving import Chunk


def chunk_weights(chunks: list[Chunk]) -> list[int]:
    """Without a tokenizer: one for each chunk that carried text."""
    return [1 if c.text else 0 for c in chunks]


def tokenizer_weights(chunks: list[Chunk], starts: Callable[[str], list[int]]) -> list[int]:
    """The tokens of the whole output text that start in each chunk's text; ``starts(text)`` is
    each token's first character's offset in ``text``."""
    ends, end = [], 0
    for chunk in chunks:
        end += len(chunk.text)
        ends.append(end)
    weights = [0] * len(chunks)
    last = max((i for i, c in enumerate(chunks) if c.text), default=None)
    if last is None:
        return weights
    for start in starts("".join(c.text for c in chunks)):
        weights[min(bisect_right(ends, start), last)] += 1
    return weights
