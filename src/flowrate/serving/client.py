"""A streaming client for the OpenAI API's /v1/completions and /v1/chat/completions.

aiohttp rather than httpx: it is installed here (httpx is not), its StreamReader yields SSE lines
as they arrive without a per-chunk thread hop, and one ClientSession pools connections for
thousands of concurrent streams on one event loop. The hot path only stamps times and keeps the
text; tokens are counted after the stream ends (serving.usage) so counting adds nothing to the
measured times.

Whatever the server sends, a request ends as a trace: an answer that is not a well-formed stream
of completion chunks (an HTTP error, no body, HTML, bad UTF-8, malformed SSE or JSON, an error
event, a connection closed mid-stream, no answer within the timeouts) is a failed request whose
``error`` says why; nothing the server sends raises out of ``stream_request``.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError

from flowrate.results.serving import Chunk, RequestTrace

ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
# statuses of a server shedding load rather than refusing the request: Too Many Requests and
# Service Unavailable (RFC 6585 section 4, RFC 9110 section 15.6.4)
SHED_STATUSES = (429, 503)
SHED = "shed by the server"  # the reason's first words (result.serving_section keys errors on them)
FIRST_BYTE_TIMEOUT = "connect/first byte timeout"
ERROR_CHARS = 200  # a reason quotes at most this much of what the server sent


class Malformed(ValueError):
    """The stream's data is not what the OpenAI API sends; the message says what it was."""


def payload(
    endpoint: str, model: str, prompt: str, max_tokens: int, history: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """One streamed request's body; on the chat endpoint ``history`` (a conversation's earlier
    turns, user and assistant messages in order) comes before the prompt's message."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
    }
    if endpoint == "chat":
        body["messages"] = [*(history or []), {"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


def _delta_text(choice: object) -> str:
    """The text one choice carries: `text` (completions) or `delta.content` (chat)."""
    if not isinstance(choice, dict):
        raise Malformed(f"a choice that is not a JSON object: {str(choice)[:80]!r}")
    if "text" in choice:
        text = choice["text"]
    else:
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            raise Malformed(f"a delta that is not a JSON object: {str(delta)[:80]!r}")
        text = delta.get("content")
    if text is None:
        return ""
    if not isinstance(text, str):
        raise Malformed(f"a choice's text that is not a string: {str(text)[:80]!r}")
    return text


def _error_text(status: int, body: bytes) -> str:
    text = body.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
        detail = data.get("detail") or data.get("error") or data.get("message") or text
    except (ValueError, AttributeError, RecursionError):
        detail = text
    if isinstance(detail, dict):
        detail = detail.get("message", detail)
    shown = str(detail).strip()[:ERROR_CHARS] or "(no body)"
    kind = f"{SHED} (HTTP {status})" if status in SHED_STATUSES else f"HTTP {status}"
    return f"{kind}: {shown}"


def _take_event(trace: RequestTrace, data: bytes, t_s: float) -> bool:
    """Record one SSE data payload; False at [DONE] or an error event. Raises Malformed (a
    ValueError, as json's own errors are) on anything the OpenAI API would not send."""
    if data == b"[DONE]":
        return False
    try:
        event = json.loads(data)
    except RecursionError:
        raise Malformed("JSON nested too deeply") from None
    if not isinstance(event, dict):
        raise Malformed("an SSE event that is not a JSON object")
    if event.get("error"):
        trace.error = f"server error in stream: {str(event['error'])[:ERROR_CHARS]}"
        return False
    choices = event.get("choices")
    if choices:
        if not isinstance(choices, list):
            raise Malformed(f"choices that are not a list: {str(choices)[:80]!r}")
        trace.chunks.append(Chunk(t_s, _delta_text(choices[0]), None))
    usage = event.get("usage")
    if usage:
        if not isinstance(usage, dict):
            raise Malformed(f"usage that is not a JSON object: {str(usage)[:80]!r}")
        trace.usage_prompt_tokens = usage.get("prompt_tokens")
        trace.usage_completion_tokens = usage.get("completion_tokens")
    return True


async def _read_stream(response: aiohttp.ClientResponse, trace: RequestTrace, t0: float) -> None:
    """Read the SSE lines of a 200 answer into the trace until [DONE] or the stream's end."""
    clock = time.perf_counter
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
    if trace.error is None and not trace.chunks:
        trace.error = "empty stream: HTTP 200 with no completion chunks"
    if trace.error is None:
        trace.end_s = clock() - t0


async def stream_request(
    session: aiohttp.ClientSession,
    url: str,
    body: dict[str, Any],
    trace: RequestTrace,
    t0: float,
    first_byte_timeout_s: float,
) -> None:
    """Send one request and fill ``trace``; every failure ends up in trace.error, never raised.

    ``first_byte_timeout_s`` bounds connecting and the arrival of the response's headers (a
    streaming server sends them at once); the session's total timeout bounds the whole request."""
    trace.sent_s = time.perf_counter() - t0
    try:
        try:
            response = await asyncio.wait_for(session.post(url, json=body), first_byte_timeout_s)
        except TimeoutError:
            trace.error = f"{FIRST_BYTE_TIMEOUT} ({first_byte_timeout_s:g} s)"
            return
        async with response:
            trace.status = response.status
            if response.status != 200:
                trace.error = _error_text(response.status, await response.read())
                return
            await _read_stream(response, trace, t0)
    except ValueError as error:  # json's errors, bad UTF-8, Malformed
        trace.error = f"malformed SSE data: {error}"[:ERROR_CHARS]
    except HttpProcessingError as error:  # a line past aiohttp's limit, a broken chunked body
        trace.error = f"malformed SSE data: {error.message}".replace("\n", " ")[:ERROR_CHARS]
    except TimeoutError:
        trace.error = "timed out (--timeout)"
    except aiohttp.ClientError as error:
        trace.error = f"{type(error).__name__}: {error}"[:ERROR_CHARS]
