"""A misbehaving OpenAI-compatible server on loopback, for serve-bench's tests.

One aiohttp server in a thread of the test process; the first segment of the URL's path picks
how it answers (``url("500")`` is http://127.0.0.1:PORT/500, and serve-bench then posts to
/500/v1/completions). The one-token probe (max_tokens 1) is answered well by the modes that
misbehave only under load (``gone``, ``stall``, ``slow``), so they reach the load. Answers
count the prompt's tokens (``prompt_tokens``) so serve-bench can size its prompts. ``silent_url()``
is a socket that takes connections (the kernel completes the handshake) and never answers.
Mode ``turns`` keeps each request's body (``bodies``); ``second-turn-500`` refuses a chat request
holding history; ``hold-after-N`` (any suffix after N: a name of its own) answers N requests,
then holds the rest as ``held`` does. Mode ``queue`` serves one request at a time, each taking
QUEUE_SERVICE_S before its first token, so its TTFT grows with the offered rate (a rate search
has a capacity to find: about 1 / QUEUE_SERVICE_S requests/s).

The sockets are bound and listening as soon as a URL is asked for, so cases may name URLs when
they are declared; ``start()`` (idempotent) serves them.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import socket
import threading
from typing import Any

from aiohttp import web

WORDS = ["one", " two", " three"]
QUEUE_SERVICE_S = 0.02
SERVER: web.AppKey[Any] = web.AppKey("server")  # the FaultServer serving the app


def _event(data: Any) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()


def _chunk(text: str) -> bytes:
    return _event({"choices": [{"text": text}]})


async def _stream(request: web.Request, *parts: bytes, done: bool = True) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for part in parts:
        await response.write(part)
    if done:
        await response.write(b"data: [DONE]\n\n")
    return response


def prompt_tokens(body: dict[str, Any], mode: str) -> int:
    """The server's count of a prompt (every message's, on the chat endpoint): a BOS token and
    one a word; in mode ``words`` a word of n letters is ceil(n / 3) tokens ("the" 1, "quick" 2),
    a tokenizer whose words differ."""
    messages = body.get("messages") or [{}]
    text = body.get("prompt") or " ".join(str(m.get("content", "")) for m in messages)
    words = str(text).split()
    return 1 + sum(-(-len(w) // 3) if mode == "words" else 1 for w in words)


def _usage_stream(chunks: int, completion_tokens: Any, prompt: int) -> list[bytes]:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion_tokens}
    return [*(_chunk(f" w{i}") for i in range(chunks)), _event({"choices": [], "usage": usage})]


async def _good(request: web.Request, max_tokens: int, prompt: int) -> web.StreamResponse:
    words = WORDS[:max_tokens]
    usage = {"prompt_tokens": prompt, "completion_tokens": len(words)}
    return await _stream(request, *(_chunk(w) for w in words), _event({"choices": [], "usage": usage}))


async def _close(request: web.Request, *parts: bytes) -> web.StreamResponse:
    """Send ``parts`` of a chunked body, then drop the connection before its end."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for part in parts:
        await response.write(part)
    assert request.transport is not None
    request.transport.close()
    return response


async def _demo(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
    """Mode ``demo``: model "tiny" only; a prompt holding "fail" gets a 500, "garble" bad JSON."""
    if body["model"] != "tiny":
        return web.json_response({"detail": f"no model {body['model']}"}, status=404)
    if "fail" in body.get("prompt", ""):
        return web.json_response({"detail": "boom"}, status=500)
    if "garble" in body.get("prompt", ""):
        return await _stream(request, b"data: {not json\n\n", done=False)
    words = WORDS[: body["max_tokens"]]
    usage = {"prompt_tokens": prompt_tokens(body, "demo"), "completion_tokens": len(words)}
    return await _stream(
        request, *(_chunk(w) for w in words), _event({"choices": [{"text": ""}], "usage": usage})
    )


async def answer(request: web.Request) -> web.StreamResponse:
    mode = request.match_info["mode"]
    request.app[SERVER].posts += 1
    body = await request.json()
    if mode == "demo":
        return await _demo(request, body)
    max_tokens = int(body.get("max_tokens", 3))
    probe = max_tokens == 1
    if mode == "metrics" and not probe:
        request.app[SERVER].answered += 1
    if mode == "queue" and not probe:
        async with request.app[SERVER].one_at_a_time():
            await asyncio.sleep(QUEUE_SERVICE_S)
            return await _good(request, max_tokens, prompt_tokens(body, mode))
    if mode == "turns" and not probe:  # answers as ok does, keeping what each request sent
        request.app[SERVER].bodies.append(body)
    if mode.startswith("hold-after-"):  # hold-after-N[-tag]: probes and the first N answered
        seen = request.app[SERVER].seen
        seen[mode] = seen.get(mode, 0) + (not probe)
        if probe or seen[mode] <= int(mode.split("-")[2]):
            return await _good(request, max_tokens, prompt_tokens(body, mode))
        mode = "held"
    if mode == "second-turn-500" and len(body.get("messages") or []) >= 3:  # a conversation's 2nd turn
        return web.json_response({"detail": "no second turns"}, status=500)
    if mode in ("ok", "words", "queue", "metrics", "garbled", "turns", "second-turn-500") or (
        probe and mode in ("gone", "stall", "slow")
    ):
        return await _good(request, max_tokens, prompt_tokens(body, mode))
    if mode == "no-prompt-count":
        return await _stream(request, _chunk("a"), _event({"choices": [], "usage": {"completion_tokens": 1}}))
    if mode in ("500", "429", "503"):
        return web.json_response({"detail": f"mode {mode}"}, status=int(mode))
    if mode == "404":
        return web.json_response({"detail": "no such model"}, status=404)
    if mode == "empty":
        return web.Response(status=200, headers={"Content-Type": "text/event-stream"})
    if mode == "html":
        return web.Response(
            status=200, text="<!DOCTYPE html><html><body>hi</body></html>\n", content_type="text/html"
        )
    if mode == "badutf8":
        return await _stream(request, b'data: {"choices": [{"text": "\xff\xfe"}]}\n\n')
    if mode == "garble":
        return await _stream(request, b"data: {not json\n\n")
    if mode == "error-event":
        return await _stream(request, _chunk("a"), _event({"error": {"message": "overloaded"}}), done=False)
    if mode == "cut":
        return await _close(request, _chunk("a"))
    if mode == "gone":  # the connection dropped before any answer, as a server that died does
        assert request.transport is not None
        request.transport.close()
        return web.Response()
    if mode in ("held", "slow"):
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(_chunk("a"))
        request.app[SERVER].held += 1
        await asyncio.sleep(3600)
        return response
    if mode == "stall":
        await asyncio.sleep(3600)
    if mode in USAGE:
        chunks, count = USAGE[mode]
        return await _stream(request, *_usage_stream(chunks, count, prompt_tokens(body, mode)))
    if mode == "usage-not-object":
        return await _stream(request, _chunk("a"), b'data: {"choices": [], "usage": "lots"}\n\n')
    if mode == "usage-int":
        return await _stream(request, _chunk("a"), b'data: {"choices": [], "usage": 7}\n\n')
    if mode == "choices-dict":
        return await _stream(request, b'data: {"choices": {"text": "a"}}\n\n')
    if mode == "choices-strings":
        return await _stream(request, b'data: {"choices": ["a", "b"]}\n\n')
    if mode == "deep":
        return await _stream(request, b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n")
    if mode == "long-line":
        return await _stream(request, b'data: {"choices": [{"text": "' + b"x" * 10_000_000 + b'"}]}\n\n')
    if mode == "surrogate":
        return await _stream(request, b'data: {"choices": [{"text": "\\udcff"}]}\n\n')
    return web.json_response({"detail": f"unknown mode {mode}"}, status=400)


async def metrics(request: web.Request) -> web.Response:
    """Mode ``metrics``'s Prometheus page, vLLM's names, moving with the load: each answered
    request (not a probe) observes a TTFT of 0.25 s and a queue time of 0.5 s and counts 16
    (16 tokens); the KV-cache gauge is answered / 100. Mode ``garbled`` serves a page that is not
    Prometheus text; every other mode has no /metrics (404)."""
    mode = request.match_info["mode"]
    if mode == "garbled":
        return web.Response(text="this is { not prometheus\n")
    if mode != "metrics":
        return web.Response(status=404, text="no metrics")
    n = request.app[SERVER].answered
    lines = [
        "# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.",
        "# TYPE vllm:time_to_first_token_seconds histogram",
        f'vllm:time_to_first_token_seconds_bucket{{le="0.5",model_name="m"}} {n}.0',
        f'vllm:time_to_first_token_seconds_bucket{{le="+Inf",model_name="m"}} {n}.0',
        f'vllm:time_to_first_token_seconds_count{{model_name="m"}} {n}.0',
        f'vllm:time_to_first_token_seconds_sum{{model_name="m"}} {0.25 * n}',
        "# TYPE vllm:request_queue_time_seconds histogram",
        f'vllm:request_queue_time_seconds_count{{model_name="m"}} {n}.0',
        f'vllm:request_queue_time_seconds_sum{{model_name="m"}} {0.5 * n}',
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f'vllm:kv_cache_usage_perc{{model_name="m"}} {n / 100}',
        "# TYPE vllm:prefix_cache_hits_total counter",
        f'vllm:prefix_cache_hits_total{{model_name="m"}} {16 * n}.0',
        "# TYPE vllm:num_requests_running gauge",
        'vllm:num_requests_running{model_name="m"} 0.0',
    ]
    return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")


# mode -> (chunks with text, the usage.completion_tokens the server claims)
USAGE: dict[str, tuple[int, Any]] = {
    "usage-big": (8, 1000),  # above max_tokens
    "usage-small": (40, 2),  # far below the chunks
    "usage-negative": (3, -5),
    "usage-string": (3, "lots"),
}


class FaultServer:
    """The sockets, bound now; the aiohttp app, served from start() on in a daemon thread."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.silent = socket.socket()
        self.silent.bind(("127.0.0.1", 0))
        self.silent.listen(128)  # never accepted: connections complete, nothing is ever read
        self.port = self.sock.getsockname()[1]
        self.thread: threading.Thread | None = None
        self.held = 0  # streams opened and held (modes held and slow): a test can wait for them
        self.posts = 0  # requests answered, every mode: a test can see that nothing was sent
        self.answered = 0  # mode metrics's requests (not its probes): what /metrics counts
        self.lock: asyncio.Lock | None = None  # mode queue's, made in the server's loop
        self.bodies: list[dict[str, Any]] = []  # mode turns's requests (not its probes), as sent
        self.seen: dict[str, int] = {}  # each hold-after-N mode's requests (not its probes)

    def one_at_a_time(self) -> asyncio.Lock:
        if self.lock is None:
            self.lock = asyncio.Lock()
        return self.lock

    def start(self) -> None:
        if self.thread is not None:
            return
        loop = asyncio.new_event_loop()
        app = web.Application()
        app[SERVER] = self
        app.router.add_post("/{mode}/v1/completions", answer)
        app.router.add_post("/{mode}/v1/chat/completions", answer)
        app.router.add_get("/{mode}/metrics", metrics)
        logging.getLogger("aiohttp.server").disabled = True  # a client gone mid-write is the point
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.SockSite(runner, self.sock).start())
        self.thread = threading.Thread(target=loop.run_forever, daemon=True, name="fault-server")
        self.thread.start()


@functools.cache
def server() -> FaultServer:
    """The one fault server of this process (its sockets bound on the first call)."""
    return FaultServer()


def url(mode: str) -> str:
    """The base URL of a mode (bound now, served once start() ran)."""
    return f"http://127.0.0.1:{server().port}/{mode}"


def silent_url() -> str:
    return f"http://127.0.0.1:{server().silent.getsockname()[1]}"


def start() -> None:
    server().start()
