"""One serve-bench run: a reachability and model probe, then the load, then the raw traces.

Every loop is bounded: connect and per-request timeouts, and a deadline for the whole run after
which unfinished requests are cancelled and recorded as such.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from flowrate.errors import ConfigError, RunFailed
from flowrate.results.serving import RequestTrace
from flowrate.serving import client, load, usage
from flowrate.serving.prompts import LocalTokenizer, Prompt

UNFINISHED = "unfinished at the deadline"


@dataclass(frozen=True)
class Target:
    url: str  # the server's base, e.g. http://127.0.0.1:8000
    model: str
    endpoint: str = "completions"  # or "chat"
    connect_timeout_s: float = 5.0
    request_timeout_s: float = 300.0


@dataclass(frozen=True)
class Conversations:
    """Multi-turn load (--turns): conversation c is ``turns[c]`` prompts in a row, the prompts list
    holding them conversation by conversation. The load schedules conversations (an open loop's
    times and a closed loop's users start them); turn k + 1 is sent ``think_time_s`` after turn
    k's answer has ended, its messages every earlier turn's prompt and answer, then its own
    prompt (AIPerf's and vLLM's multi-turn benchmarks send the history so). A failed turn ends its
    conversation: the turns after it are not sent."""

    turns: tuple[int, ...]
    think_time_s: float = 0.0

    def firsts(self) -> list[int]:
        """Each conversation's first prompt's index in the prompts list."""
        out, at = [], 0
        for count in self.turns:
            out.append(at)
            at += count
        return out


@dataclass
class Outcome:
    traces: list[RequestTrace] = field(default_factory=list)
    partial: bool = False  # stopped by Ctrl-C: what was measured is kept
    wall_s: float = 0.0


def split_url(url: str) -> tuple[str, int]:
    """The host and port of an http(s) URL; ConfigError naming --url for anything else."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise ConfigError("--url", f"{url!r}: the port must be 1 to 65535") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError("--url", f"{url!r} is not an http(s) URL like http://127.0.0.1:8000")
    if port == 0:
        raise ConfigError("--url", f"{url!r}: the port must be 1 to 65535")
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


def check_reachable(target: Target) -> None:
    """One line, within the connect timeout, when nothing listens at the URL."""
    host, port = split_url(target.url)
    try:
        socket.create_connection((host, port), timeout=target.connect_timeout_s).close()
    except OSError as error:
        reason = "timed out" if isinstance(error, TimeoutError) else (error.strerror or str(error))
        raise ConfigError(
            "--url", f"cannot connect to {host}:{port} ({reason}); is the server running?"
        ) from None


def _session(target: Target, concurrency: int) -> aiohttp.ClientSession:
    timeout = aiohttp.ClientTimeout(total=target.request_timeout_s, sock_connect=target.connect_timeout_s)
    connector = aiohttp.TCPConnector(limit=max(100, concurrency), force_close=False)
    return aiohttp.ClientSession(timeout=timeout, connector=connector)


async def _probe(target: Target, session: aiohttp.ClientSession) -> None:
    """A one-token request first: a rejected model name is one line (exit 2), and a server that
    does not answer at all one line (exit 1), instead of N failed requests. Any other failure
    (an HTTP 5xx, shed load, a malformed stream) is left to the load, whose requests record it."""
    trace = RequestTrace(index=-1, scheduled_s=0.0, max_tokens=1)
    body = client.payload(target.endpoint, target.model, "hello", 1)
    url = target.url + client.ENDPOINTS[target.endpoint]
    await client.stream_request(session, url, body, trace, 0.0, target.connect_timeout_s)
    status = trace.status
    if status is not None and 400 <= status < 500 and status not in client.SHED_STATUSES:
        path = client.ENDPOINTS[target.endpoint]
        raise ConfigError(
            "--model",
            f"the server refused {target.model!r} at {path} (or has no such endpoint): {trace.error}",
        )
    if status is None and trace.error:
        raise RunFailed(
            f"the server at {target.url} did not answer a one-token probe ({trace.error}); no load was sent"
        )


async def _probe_within(target: Target, session: aiohttp.ClientSession, deadline_s: float) -> None:
    try:
        await asyncio.wait_for(_probe(target, session), deadline_s)
    except TimeoutError:
        raise RunFailed(
            f"the one-token probe of {target.url} took the whole --deadline ({deadline_s:g} s); "
            "no load was sent"
        ) from None


PROBES_AT_ONCE = 8  # calibration probes in flight together


async def _prompt_tokens(target: Target, texts: list[str], deadline_s: float) -> list[int | None]:
    url = target.url + client.ENDPOINTS[target.endpoint]
    begin = time.perf_counter()
    async with _session(target, PROBES_AT_ONCE) as session:
        await _probe_within(target, session, deadline_s)
        deadline_s -= time.perf_counter() - begin
        gate = asyncio.Semaphore(PROBES_AT_ONCE)

        async def one(text: str) -> int | None:
            trace = RequestTrace(index=-1, scheduled_s=0.0, max_tokens=1)
            body = client.payload(target.endpoint, target.model, text, 1)
            async with gate:
                await client.stream_request(session, url, body, trace, 0.0, target.connect_timeout_s)
            said = trace.usage_prompt_tokens
            return said if trace.ok and isinstance(said, int) and not isinstance(said, bool) else None

        return await asyncio.wait_for(asyncio.gather(*(one(text) for text in texts)), deadline_s)


def prompt_tokens(target: Target, texts: list[str], deadline_s: float) -> list[int | None]:
    """The server's usage.prompt_tokens for each text, sent as a one-token request (after the
    model probe, so a refused model or a silent server is said as a run says it); None where a
    request failed or its answer had no count. Bounded by ``deadline_s`` in all (TimeoutError)."""
    check_reachable(target)
    return asyncio.run(_prompt_tokens(target, texts, deadline_s))


async def _run(
    target: Target,
    prompts: list[Prompt],
    times: list[float] | None,
    concurrency: int,
    deadline_s: float,
    outcome: Outcome,
    warmup: list[Prompt],
    observe: Callable[[str], None] | None,
    conversations: Conversations | None,
) -> None:
    url = target.url + client.ENDPOINTS[target.endpoint]
    begin = time.perf_counter()
    async with _session(target, concurrency) as session:
        await _probe_within(target, session, deadline_s)
        t0 = time.perf_counter()
        deadline_s -= t0 - begin  # the deadline covers the probe and the load together

        async def send(
            index: int,
            prompt: Prompt,
            origin: float,
            scheduled: float | None = None,
            warm: bool = False,
            history: list[dict[str, str]] | None = None,
            turn: tuple[int, int] | None = None,
        ) -> RequestTrace:
            if scheduled is None:
                scheduled = times[index] if times is not None and not warm else time.perf_counter() - origin
            trace = RequestTrace(
                index,
                scheduled,
                prompt_tokens=prompt.tokens,
                max_tokens=prompt.max_tokens,
                input_len=prompt.asked,
                warmup=warm,
                prefix_group=prompt.group,
                conversation=None if turn is None else turn[0],
                turn=None if turn is None else turn[1],
            )
            outcome.traces.append(trace)
            if warm:
                warmed.append(trace)
            body = client.payload(target.endpoint, target.model, prompt.text, prompt.max_tokens, history)
            try:
                await client.stream_request(session, url, body, trace, origin, target.connect_timeout_s)
            except asyncio.CancelledError:
                trace.error = trace.error or UNFINISHED
                raise
            return trace

        warmed: list[RequestTrace] = []
        if warmup:  # at the load's concurrency (one at a time for an open loop), before its clock
            await load.closed_loop(
                len(warmup), concurrency, lambda i: _ended(send(i, warmup[i], t0, warm=True)), t0, deadline_s
            )
            now = time.perf_counter()
            deadline_s -= now - t0
            for trace in warmed:
                trace.shift(t0 - now)
            t0 = now
        if observe is not None:  # --server-metrics: just before the first measured request
            observe("before")
            t0 = time.perf_counter()

        def send_one(index: int) -> Coroutine[Any, Any, None]:
            return _ended(send(index, prompts[index], t0))

        async def converse(number: int) -> None:
            assert conversations is not None
            first, history = firsts[number], list[dict[str, str]]()
            scheduled = times[number] if times is not None else time.perf_counter() - t0
            for turn in range(conversations.turns[number]):
                if turn:
                    await asyncio.sleep(conversations.think_time_s)
                    scheduled = time.perf_counter() - t0
                prompt = prompts[first + turn]
                trace = await send(first + turn, prompt, t0, scheduled, history=history, turn=(number, turn))
                if not trace.ok:
                    return
                history = [
                    *history,
                    {"role": "user", "content": prompt.text},
                    {"role": "assistant", "content": trace.text},
                ]

        starts = len(prompts) if conversations is None else len(conversations.turns)
        firsts = conversations.firsts() if conversations is not None else []
        start = send_one if conversations is None else converse
        if times is not None:
            await load.open_loop(times, start, t0, deadline_s)
        else:
            await load.closed_loop(starts, concurrency, start, t0, deadline_s)
        outcome.wall_s = time.perf_counter() - t0
        if observe is not None:
            observe("after")


async def _ended(sending: Coroutine[Any, Any, RequestTrace]) -> None:
    await sending


def run(
    target: Target,
    prompts: list[Prompt],
    *,
    times: list[float] | None = None,
    concurrency: int = 1,
    deadline_s: float = 600.0,
    tokenizer: LocalTokenizer | None = None,
    warmup: list[Prompt] | None = None,
    observe: Callable[[str], None] | None = None,
    conversations: Conversations | None = None,
) -> Outcome:
    """Send `prompts` open-loop at `times`, or closed-loop at `concurrency` when times is None,
    after the `warmup` prompts (closed-loop at `concurrency`; their traces come first, marked
    warmup, on the load's clock). Ctrl-C stops it: the traces so far are kept and the outcome
    marked partial. ``observe`` is called with "before" just before the first measured request
    and "after" once the last has ended (--server-metrics scrapes there). With ``conversations``
    the times (or the closed loop's users) start conversations, not single requests."""
    check_reachable(target)
    outcome = Outcome()
    try:
        asyncio.run(
            _run(
                target, prompts, times, concurrency, deadline_s, outcome, warmup or [], observe, conversations
            )
        )
    except KeyboardInterrupt:
        outcome.partial = True
        for trace in outcome.traces:
            if trace.end_s is None and trace.error in (None, UNFINISHED):
                trace.error = "interrupted"
    for trace in outcome.traces:
        usage.finish(trace, tokenizer)
    outcome.traces.sort(key=lambda t: (not t.warmup, t.index))  # a conversation's turns in a row
    return outcome
