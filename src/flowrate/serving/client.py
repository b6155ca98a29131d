"""A streaming client for the OpenAI API's /v1/completions and /v1/chat/completions.

aiohttp rather than httpx: it is installed here (httpx is not), its StreamReader yields SSE lines
as they arrive without a per-chunk thread hop, and one ClientSession pools connections for
thousands of concurrent streams on one event loop. The hot path only stamps times and keeps the
text; tokens are counted after the stream ends so counting adds nothing to the measured times.
"""

from __future__ import annotations

import json
import time
from typing import Any

import aiohttp

from flowrate.serving.trace import Chunk, RequestTrace

ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


def payload(endpoint: str, model: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
    }
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


def _delta_text(choice: dict[str, Any]) -> str:
    if "text" in choice:
        return choice.get("text") or ""
    return (choice.get("delta") or {}).get("content") or ""


def _error_text(status: int, body: str) -> str:
    try:
        data = json.loads(body)
        detail = data.get("detail") or data.get("error") or data.get("message") or body
    except (ValueError, AttributeError):
        detail = body
    if isinstance(detail, dict):
        detail = detail.get("message", detail)
    shown = str(detail).strip()[:200]
    return f"HTTP {status}: {shown}" if shown else f"HTTP {status} (no body)"


def _take_event(trace: RequestTrace, data: bytes, t_s: float) -> bool:
    """Record one SSE data payload; False at [DONE]. Raises ValueError on malformed JSON."""
    if data == b"[DONE]":
        return False
    event = json.loads(data)
    if not isinstance(event, dict):
        raise ValueError("an SSE event that is not a JSON object")
    if event.get("error"):
        trace.error = f"server error in stream: {str(event['error'])[:200]}"
        return False
    if choices := event.get("choices"):
        trace.chunks.append(Chunk(t_s, _delta_text(choices[0]), None))
    if usage := event.get("usage"):
        trace.usage_prompt_tokens = usage.get("prompt_tokens")
        trace.usage_completion_tokens = usage.get("completion_tokens")
    return True


async def stream_request(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], trace: RequestTrace, t0: float
) -> None:
    """Send one request and fill ``trace``; every failure ends up in trace.error, never raised."""
    clock = time.perf_counter
    trace.sent_s = clock() - t0
    try:
        async with session.post(url, json=body) as response:
            trace.status = response.status
            if response.status != 200:
                trace.error = _error_text(response.status, await response.text())
                return
            async for raw in response.content:
                t_s = clock() - t0
                line = raw.strip()
                if not line or line.startswith(b":"):
                    continue  # keep-alive or an SSE comment
                if not line.startswith(b"data:"):
                    if line.startswith((b"event:", b"id:", b"retry:")):
                        continue
                    trace.error = f"malformed SSE line: {line[:80]!r}"
                    return
                if not _take_event(trace, line[5:].strip(), t_s):
                    break
            if trace.error is None:
                trace.end_s = clock() - t0
    except ValueError as error:
        trace.error = f"malformed SSE data: {error}"
    except TimeoutError:
        trace.error = "timed out"
    except aiohttp.ClientError as error:
        trace.error = f"{type(error).__name__}: {error}"[:200]


def count_tokens(trace: RequestTrace, encode: Any) -> None:
    """Tokens per chunk by the local tokenizer: the growth of the running text's token count,
    so a token split across chunks counts once (never below 0)."""
    text, previous = "", 0
    for chunk in trace.chunks:
        text += chunk.text
        count = len(encode(text)) if text else 0
        chunk.tokens = max(0, count - previous)
        previous = max(previous, count)
