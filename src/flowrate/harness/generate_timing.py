"""The clocks of `flowrate generate` and the arithmetic of its latency figures.

One generation (a "request": B sequences decoded together) is timed as the moments its tokens
became available, measured from the moment the prompt was handed over: the first token ends the
prefill, each later one a decode step. From those moments alone (docs: MEASUREMENT.md's
definitions, vLLM's and genai-perf's agree on these four):

- TTFT = first token − start;
- inter-token gaps = the differences between consecutive tokens (n_out − 1 of them);
- E2E = last token − start;
- TPOT = (E2E − TTFT) / (n_out − 1), the mean gap (None for a single token).

Prefill tokens/s = B × prompt length / TTFT; decode tokens/s = B × (n_out − 1) / (E2E − TTFT).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch


class WallClock:
    """Synchronized host clock: the device is waited for before each reading (CPU: no wait)."""

    def __init__(self, sync: Callable[[], None], now: Callable[[], float] = time.perf_counter) -> None:
        self._sync, self._now = sync, now
        self._start = 0.0
        self._marks: list[float] = []

    def start(self) -> None:
        self._sync()
        self._marks = []
        self._start = self._now()

    def mark(self) -> None:
        self._sync()
        self._marks.append(self._now())

    def seconds(self) -> list[float]:
        """Each mark's seconds since start."""
        return [m - self._start for m in self._marks]


class CudaEventClock:
    """CUDA events recorded on the stream, read once at the end: no synchronization per token."""

    def __init__(self) -> None:
        self._start: Any = None
        self._marks: list[Any] = []

    def _event(self) -> Any:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def start(self) -> None:
        self._marks = []
        self._start = self._event()

    def mark(self) -> None:
        self._marks.append(self._event())

    def seconds(self) -> list[float]:
        torch.cuda.synchronize()
        return [self._start.elapsed_time(m) / 1e3 for m in self._marks]


@dataclass(frozen=True)
class RequestTiming:
    """One generation's latencies in seconds, from its tokens' moments since start."""

    ttft_s: float
    e2e_s: float
    tpot_s: float | None  # None with a single output token
    gaps_s: list[float]  # every inter-token gap, n_out − 1 of them

    @classmethod
    def from_token_times(cls, times: Sequence[float]) -> RequestTiming:
        if not times:
            raise ValueError("a generation has at least one token")
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        ttft, e2e = times[0], times[-1]
        tpot = (e2e - ttft) / (len(times) - 1) if len(times) > 1 else None
        return cls(ttft_s=ttft, e2e_s=e2e, tpot_s=tpot, gaps_s=gaps)

    def rates(self, batch_size: int, prompt_len: int) -> dict[str, float | None]:
        """Prefill and decode tokens/s of this generation (all B sequences)."""
        decode_s = self.e2e_s - self.ttft_s
        decode_tokens = batch_size * len(self.gaps_s)
        return {
            "prefill_tokens_per_sec": batch_size * prompt_len / self.ttft_s if self.ttft_s > 0 else None,
            "decode_tokens_per_sec": decode_tokens / decode_s if decode_s > 0 and decode_tokens else None,
        }
