"""The raw record of one request: what was sent when, and every streamed chunk's arrival.

Times are seconds on one monotonic clock (time.perf_counter) measured from the run's start, so
every metric under every definition is computed later from these numbers alone.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Chunk:
    """One SSE data event that carried ``choices``."""

    t_s: float  # arrival, since the run's start
    text: str  # the delta text ("" for a chunk carrying only a finish_reason)
    # the request's output tokens placed on this chunk (serving.tokens; they sum to the trace's
    # output_tokens); None until the trace is settled. Records made before output_tokens existed
    # hold the local tokenizer's count of the delta here, or None without one
    tokens: int | None


@dataclass
class RequestTrace:
    index: int
    scheduled_s: float  # when the load plan meant to send it
    sent_s: float = 0.0  # just before the request was written
    prompt_tokens: int | None = None  # by the local tokenizer (None without one)
    max_tokens: int = 0
    chunks: list[Chunk] = field(default_factory=list)
    end_s: float | None = None  # the stream's end ([DONE] or connection close)
    status: int | None = None  # HTTP status; None when no answer came
    error: str | None = None  # None: the request succeeded
    usage_prompt_tokens: int | None = None  # the server's `usage`, when it sent one
    usage_completion_tokens: int | None = None  # kept only when it agrees with the stream (usage.py)
    # what output_tokens counts: "usage", or the stream's own count, "tokenizer" (the whole text
    # tokenized once) or "chunks" (one a chunk with text); "stream" in records made before
    token_count_source: str | None = None
    usage_disagreement: str | None = None  # why the server's completion count was not used
    input_len: int | None = None  # the prompt length asked for (None: a dataset's prompt)
    output_tokens: int | None = None  # the one output count (usage.settle) every definition reads
    # a --warmup request: sent before the load, kept out of every figure; its times are on the
    # load's clock, so they are negative
    warmup: bool = False
    prefix_group: int | None = None  # the --shared-prefix-len prefix its prompt starts with
    # --turns: the conversation it belongs to and its turn in it (0 first), None for single turns
    conversation: int | None = None
    turn: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.end_s is not None

    @property
    def lateness_s(self) -> float:
        return self.sent_s - self.scheduled_s

    @property
    def text(self) -> str:
        return "".join(c.text for c in self.chunks)

    def shift(self, by_s: float) -> None:
        """Move every time by ``by_s`` seconds (onto another origin of the same clock)."""
        self.scheduled_s += by_s
        self.sent_s += by_s
        self.end_s = None if self.end_s is None else self.end_s + by_s
        for chunk in self.chunks:
            chunk.t_s += by_s

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestTrace:
        chunks = [Chunk(**c) for c in data.get("chunks", [])]
        return cls(**{**data, "chunks": chunks})


def measured(traces: list[RequestTrace]) -> list[RequestTrace]:
    """The requests the figures count: all but --warmup's."""
    return [t for t in traces if not t.warmup]
