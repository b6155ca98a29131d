"""How accurate is serve-bench's sender, and how much does its client add to TTFT?

Against a null streaming endpoint (benchmarks/serve_null_server.py, its own process, answering at
once) on loopback:

- lateness: serve-bench's open-loop sender at --rate requests/s (Poisson), the p99 of (actual send
  - planned send) over every request. Target at 200 requests/s: < 1 ms. Beside it, the same plan
  with a send that does nothing: what the event loop and the OS scheduler alone allow here.
- client TTFT: serve-bench's aiohttp client against a bare asyncio-socket client (writes the
  request, reads to the first data line: the least a client can do), one request at a time,
  interleaved in ABBA order after 10 warm-up rounds (benchmarks/side_by_side.py's
  in_rounds_async; before it, A B A B) so both see the same machine. The difference of medians
  is what the client adds. Target: < 0.5 ms.

    python benchmarks/serve_client.py                  # 2000 sends at 200/s, 500 TTFT pairs
    python benchmarks/serve_client.py -n 200 --pairs 50
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import aiohttp
import numpy as np

from flowrate.results.serving import RequestTrace
from flowrate.serving import bench, client, load, prompts
from record import Figure, Target, record  # beside this script
from side_by_side import in_rounds_async

HERE = Path(__file__).resolve().parent


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _bare_ttft(port: int, body: bytes) -> float:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = (
        f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    start = time.perf_counter()
    writer.write(request)
    while not (await reader.readline()).startswith(b"data:"):
        pass
    ttft = time.perf_counter() - start
    await reader.read()
    writer.close()
    return ttft


async def _ttft_pairs(port: int, pairs: int) -> tuple[list[float], list[float]]:
    import json

    payload = client.payload("completions", "null", "hello", 4)
    raw = json.dumps(payload).encode()
    url = f"http://127.0.0.1:{port}/v1/completions"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:

        async def ours() -> float:
            trace = RequestTrace(0, 0.0)
            await client.stream_request(session, url, payload, trace, time.perf_counter(), 10.0)
            return trace.chunks[0].t_s - trace.sent_s

        done = await in_rounds_async({"ours": ours, "bare": partial(_bare_ttft, port, raw)}, pairs, warmup=10)
    return list(done["ours"]), list(done["bare"])


def _scheduler_floor(times: list[float]) -> list[float]:
    """The same plan with a send that does nothing: the lateness the event loop and the OS alone
    give on this machine (a loaded machine preempts even a process that never sleeps)."""
    late: list[float] = []

    async def run() -> None:
        t0 = time.perf_counter()

        async def send(index: int) -> None:
            late.append(time.perf_counter() - t0 - times[index])

        await load.open_loop(times, send, t0, times[-1] + 5)

    asyncio.run(run())
    return late


def _ms(values: list[float]) -> str:
    a = np.asarray(values) * 1000
    return f"median {np.median(a):.3f} ms, p99 {np.percentile(a, 99):.3f} ms (n={len(a)})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=2000, help="sends in the lateness test")
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--pairs", type=int, default=500, help="TTFT pairs")
    args = parser.parse_args()
    port = _port()
    server = subprocess.Popen(
        [sys.executable, str(HERE / "serve_null_server.py"), str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        target = bench.Target(f"http://127.0.0.1:{port}", "null")
        plan = prompts.synthetic(args.n, (4, 4), (4, 4), None)
        times = load.arrival_times(args.n, args.rate, seed=0)
        outcome = bench.run(target, plan, times=times, deadline_s=args.n / args.rate + 30)
        late = [t.lateness_s for t in outcome.traces]
        failed = sum(not t.ok for t in outcome.traces)
        print(f"sender lateness at {args.rate:g} req/s: {_ms(late)}; {failed} failed requests")
        print(f"  p99 lateness {np.percentile(late, 99) * 1000:.3f} ms (target < 1 ms)")
        floor_late = _scheduler_floor(times)
        print(f"same plan, a send that does nothing (the machine's floor): {_ms(floor_late)}")
        ours, bare = asyncio.run(_ttft_pairs(port, args.pairs))
        print(f"TTFT, serve-bench client: {_ms(ours)}")
        print(f"TTFT, bare socket client: {_ms(bare)}")
        added = (np.median(ours) - np.median(bare)) * 1000
        print(f"  client adds {added:.3f} ms to the median TTFT (target < 0.5 ms)")
        p99 = float(np.percentile(late, 99)) * 1000
        floor = float(np.percentile(floor_late, 99)) * 1000
        record(
            "serve_client",
            [
                Figure("sender p99 lateness", round(p99, 4), "ms", Target("<", 1.0), f"{args.rate:g} req/s"),
                Figure("the machine's floor, p99", round(floor, 4), "ms", note="a send that does nothing"),
                Figure("failed requests", failed, f"of {args.n}", Target("==", 0)),
                Figure("client's added median TTFT", round(float(added), 4), "ms", Target("<", 0.5)),
            ],
            note=f"{args.n} sends at {args.rate:g} req/s, {args.pairs} TTFT pairs",
        )
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
