"""Load plans (when each request is sent) and the senders that carry them out.

Arrival rates follow vLLM's benchmark_serving: gaps are gamma-distributed with shape =
burstiness and scale = 1 / (rate * burstiness), so the mean gap is 1/rate and burstiness 1 is a
Poisson process (below 1 burstier, above 1 more regular). A ramp-up raises the rate linearly
from 0 over ramp_up_s: arrivals are drawn at unit rate and mapped through the inverse of the
cumulative rate, which keeps the gap law while the rate changes.

The open-loop sender fires each request at its planned time whatever the responses do (a slow
server gets a queue, as real users give it, instead of a politely slowed load).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from flowrate.errors import ConfigError

# the last stretch before a send is spun (yielding to the loop) rather than slept: the event
# loop's sleep wakes up to ~1 ms late, the spin keeps p99 lateness well under that
SPIN_S = 0.002


@dataclass(frozen=True)
class Planned:
    at_s: float  # send time since the run's start
    prompt_len: int | None = None  # from a replayed trace
    output_len: int | None = None


def arrival_times(
    n: int,
    rate: float,
    burstiness: float = 1.0,
    ramp_up_s: float = 0.0,
    seed: int = 0,
    constant: bool = False,
) -> list[float]:
    """n send times for `rate` requests/s (inf: all at 0); ``constant``: exactly 1/rate apart (the
    limit of the gamma gaps as burstiness grows, with no jitter left)."""
    if math.isinf(rate):
        return [0.0] * n
    rng = np.random.default_rng(seed)
    gaps = np.ones(n) if constant else rng.gamma(shape=burstiness, scale=1.0 / burstiness, size=n)
    units = np.cumsum(gaps) - gaps[0]  # in "expected arrivals"; the first at 0
    if ramp_up_s <= 0:
        return [float(u / rate) for u in units]
    # cumulative rate: rate t^2 / (2 ramp) during the ramp, then rate (t - ramp / 2)
    at_ramp_end = rate * ramp_up_s / 2
    return [
        float(math.sqrt(2 * ramp_up_s * u / rate)) if u < at_ramp_end else float(u / rate + ramp_up_s / 2)
        for u in units
    ]


def read_replay(path: Path, max_len: int, max_total: int) -> list[Planned]:
    """A JSONL trace: one {"time": s, "prompt_len": n, "output_len": n} per line; times finite
    and >= 0, lengths 1 to max_len, the prompts' lengths at most max_total together."""
    plan: list[Planned] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise ConfigError("--replay", f"{path}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ConfigError("--replay", f"{path} is not UTF-8 text (a JSONL trace)") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            item = Planned(float(row["time"]), int(row["prompt_len"]), int(row["output_len"]))
        except (ValueError, KeyError, TypeError, OverflowError, RecursionError):
            raise ConfigError(
                "--replay",
                f"{path} line {number}: expected a JSON object with numbers time, prompt_len, output_len",
            ) from None
        if not (
            0 <= item.at_s < math.inf
            and 1 <= (item.prompt_len or 0) <= max_len
            and 1 <= (item.output_len or 0) <= max_len
        ):
            raise ConfigError(
                "--replay", f"{path} line {number}: a finite time >= 0 and lengths 1 to {max_len} expected"
            )
        plan.append(item)
    if not plan:
        raise ConfigError("--replay", f"{path}: no requests in it")
    if sum(p.prompt_len or 0 for p in plan) > max_total:
        raise ConfigError("--replay", f"{path}: its prompts hold more than {max_total} tokens in all")
    start = min(p.at_s for p in plan)
    return sorted((Planned(p.at_s - start, p.prompt_len, p.output_len) for p in plan), key=lambda p: p.at_s)


async def wait_until(target: float, clock: Callable[[], float] = time.perf_counter) -> None:
    remaining = target - clock()
    if remaining > SPIN_S:
        await asyncio.sleep(remaining - SPIN_S)
    while clock() < target:
        await asyncio.sleep(0)


async def open_loop(
    times: list[float], send: Callable[[int], Coroutine[Any, Any, None]], t0: float, deadline_s: float
) -> None:
    """Start send(i) at t0 + times[i], never waiting on an answer; then wait for all, at most
    until t0 + deadline_s (the rest are cancelled: the caller marks them unfinished)."""
    tasks: list[asyncio.Task[None]] = []
    for index, at in enumerate(times):
        if at > deadline_s:
            break
        await wait_until(t0 + at)
        tasks.append(asyncio.create_task(send(index)))
    await _finish(tasks, t0 + deadline_s)


async def closed_loop(
    n: int, concurrency: int, send: Callable[[int], Coroutine[Any, Any, None]], t0: float, deadline_s: float
) -> None:
    """Fixed concurrency: each of `concurrency` users sends its next request when one ends."""
    counter = iter(range(n))

    async def user() -> None:
        for index in counter:
            if time.perf_counter() - t0 > deadline_s:
                return
            await send(index)

    await _finish([asyncio.create_task(user()) for _ in range(min(concurrency, n))], t0 + deadline_s)


async def _finish(tasks: list[asyncio.Task[None]], deadline: float) -> None:
    if not tasks:
        return
    _, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline - time.perf_counter()))
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
