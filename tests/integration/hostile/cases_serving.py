"""serve-bench against a misbehaving server (tests/fault_server.py) and with bad options.

A fault is a failed request, never a crash: each row's server answers every request one wrong
way, and the run must end with exit 1 and one `error:` line naming the reason, recorded all the
same (the store gains one run and --out holds it, both reading back); a server shedding load
(HTTP 429/503) is said so. A usage that disagrees with the stream is a warning, and the run
passes. Every option is checked before the first request: exit 2, one line naming the flag, the
store as it was.
"""

from __future__ import annotations

from typing import Any

import fault_server
from flowrate.results.schema import Result
from flowrate.results.serving import Serving
from flowrate.results.store import Store
from hostile.case import FAILED, OK, RUN_A, RUN_B, USAGE, Case, Workspace

NOWHERE = "http://127.0.0.1:9"  # flags are refused before anything connects


def serving(ws: Workspace) -> None:
    """The fault server, started once for the session."""
    fault_server.start()


def _file(name: str, relative: str, data: bytes) -> Any:
    """A file of ``data`` at root/relative, named ``name`` for argv."""

    def setup(ws: Workspace) -> None:
        path = ws.path(name, relative)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    return setup


def _bench(url: str, *extra: str) -> tuple[str, ...]:
    return ("serve-bench", "--url", url, "--model", "m", "-n", "3", "--rate", "inf", "--quiet", *extra)


def _recorded(ws: Workspace, outcome: Any) -> list[str]:
    """The store gained one serving run and --out ({result}) holds it; both read back."""
    with Store(ws.paths["store"]) as store:
        runs = [run for run in store.runs() if run.run_id not in (RUN_A, RUN_B)]
        if len(runs) != 1:
            return [f"the store holds {len(runs)} new runs, not 1"]
        stored = runs[0].result
    written = Result.load(ws.paths["result"])
    problems = [] if written.run_id == stored.run_id else ["--out holds another run than the store"]
    if written.serving is None or len(written.serving.traces) != 3:
        problems.append("--out holds no serving section with the 3 requests' traces")
    return problems


def _fault(mode: str, says: str, *extra: str, timeout_s: float = 30.0, name: str = "") -> Case:
    return Case(
        f"serve-fault-{name or mode}",
        _bench(fault_server.url(mode), "--out", "{result}", *extra),
        FAILED,
        (says,),
        setup=serving,
        watch={"store": "db+"},
        check=_recorded,
        timeout_s=timeout_s,
    )


def _usage(mode: str, says: str) -> Case:
    def stream_counted(ws: Workspace, outcome: Any) -> list[str]:
        serving_section = Result.load(ws.paths["result"]).serving or Serving()
        sources = {t.token_count_source for t in serving_section.traces}
        problems = [] if sources == {"chunks"} else [f"token counts from {sources}, not the chunks"]
        chunks = fault_server.USAGE[f"usage-{mode}"][0]  # one token a chunk with text, 3 requests
        counted = serving_section.figures().output_tokens
        if counted != 3 * chunks:
            problems.append(f"{counted} output tokens recorded, not the stream's {3 * chunks}")
        if serving_section.server_device != "test box":
            problems.append(f"server_device is {serving_section.server_device!r}")
        return problems

    return Case(
        f"serve-usage-{mode}",
        _bench(fault_server.url(f"usage-{mode}"), "--out", "{result}", "--server-device", "test box"),
        OK,
        setup=serving,
        watch={"result": "json"},
        warns=("usage disagreed with their stream", says),
        check=stream_counted,
    )


def _flag(name: str, says: tuple[str, ...], *extra: str, url: str = NOWHERE, setup: Any = None) -> Case:
    argv = ("serve-bench", "--url", url, "--model", "m", "--quiet", *extra)
    return Case(f"serve-flag-{name}", argv, USAGE, says, setup=setup, timeout_s=10.0)


FAULTS = [
    _fault("500", "no request completed (HTTP 500 x3)"),
    _fault("empty", "empty stream x3"),
    _fault("html", "malformed SSE line x3"),
    _fault("badutf8", "malformed SSE data x3"),
    _fault("garble", "malformed SSE data x3"),
    _fault("error-event", "server error in stream x3"),
    _fault("cut", "ClientPayloadError x3"),
    _fault("gone", "ServerDisconnectedError x3"),
    _fault("held", "timed out (--timeout) x3", "--timeout", "1"),
    _fault("slow", "unfinished at the deadline x3", "--deadline", "1", name="held-past-deadline"),
    _fault("stall", "connect/first byte timeout (1 s) x3", "--connect-timeout", "1"),
    _fault("usage-not-object", "malformed SSE data x3"),
    _fault("usage-int", "malformed SSE data x3"),
    _fault("choices-dict", "malformed SSE data x3"),
    _fault("choices-strings", "malformed SSE data x3"),
    _fault("deep", "malformed SSE data x3"),
    _fault("long-line", "malformed SSE data x3"),
    _fault("429", "the server shed the load: all 3 requests were answered HTTP 429/503"),
    _fault("503", "the server shed the load"),
    Case(
        "serve-fault-silent",
        _bench(fault_server.silent_url(), "--connect-timeout", "1"),
        FAILED,
        ("did not answer a one-token probe (connect/first byte timeout (1 s))", "no load was sent"),
        timeout_s=20.0,
    ),
    Case(
        "serve-fault-probe-past-deadline",
        _bench(fault_server.url("held"), "--deadline", "1"),
        FAILED,
        ("the one-token probe", "took the whole --deadline (1 s)", "no load was sent"),
        setup=serving,
        timeout_s=20.0,
    ),
    Case(
        "serve-fault-model-refused",
        _bench(fault_server.url("404")),
        USAGE,
        ("--model", "the server refused 'm'"),
        setup=serving,
    ),
]

USAGES = [
    _usage("big", "outside 1..max_tokens 128"),
    _usage("small", "2 for 40 chunks with text"),
    _usage("negative", "-5 is not an integer >= 0"),
    _usage("string", "'lots' is not an integer >= 0"),
]

FLAGS = [
    _flag("url-port", ("--url", "port must be 1 to 65535"), url="http://127.0.0.1:99999"),
    _flag("rate-nan", ("--rate", "nan is not a rate"), "--rate", "nan"),
    _flag("rate-nan-search", ("--rate", "nan"), "--rate", "nan", "--find-max-rate", "--slo", "ttft_ms=5"),
    _flag("rate-list-nan", ("--rate", "nan is not a rate"), "--rate", "1,nan"),
    _flag("rate-list-inf", ("--rate", "finite numbers above 0, not inf"), "--rate", "1,inf"),
    _flag("rate-list-twice", ("--rate", "1 is given twice"), "--rate", "1,2,1"),
    _flag("concurrency-list-twice", ("--concurrency", "4 is given twice"), "--concurrency", "4,4"),
    _flag("sweep-out", ("--out", "a run of its own"), "--rate", "1,2", "--out", "{tmp}/o.json"),
    _flag("turns-completions", ("--turns", "need --endpoint chat"), "--turns", "2"),
    _flag("turns-huge", ("--turns", "at most 1000"), "--endpoint", "chat", "--turns", "5000"),
    _flag("think-time-inf", ("--think-time", "not a finite"), "--turns", "2", "--think-time", "inf"),
    _flag("connect-timeout-nan", ("--connect-timeout", "not a finite"), "--connect-timeout", "nan"),
    _flag("connect-timeout-inf", ("--connect-timeout", "not a finite"), "--connect-timeout", "inf"),
    _flag("timeout-nan", ("--timeout", "not a finite"), "--timeout", "nan"),
    _flag("deadline-inf", ("--deadline", "not a finite"), "--deadline", "inf"),
    _flag("burstiness-nan", ("--burstiness", "not a finite"), "--burstiness", "nan"),
    _flag(
        "constant-and-burstiness",
        ("--burstiness", "constant arrivals have none"),
        *("--rate", "2", "--arrivals", "constant", "--burstiness", "2"),
    ),
    _flag(
        "arrivals-unknown", ("--arrivals", "'uniform' is not one of"), "--rate", "2", "--arrivals", "uniform"
    ),
    _flag("ramp-up-nan", ("--ramp-up", "not a finite"), "--ramp-up", "nan"),
    _flag("ramp-up-inf", ("--ramp-up", "not a finite"), "--ramp-up", "inf"),
    _flag("max-error-rate-nan", ("--max-error-rate", "not a finite"), "--max-error-rate", "nan"),
    _flag("n-huge", ("--num-requests", "1<=x<=10000000"), "-n", "1000000000000"),
    _flag("input-len-huge", ("--input-len", "lengths 1 to"), "--input-len", "1000000000000"),
    _flag("input-len-total", ("--input-len", "tokens in all"), "-n", "100000", "--input-len", "100000"),
    _flag("output-len-zero", ("--output-len", "lengths 1 to"), "--output-len", "0"),
    _flag("seed-negative", ("--seed",), "--seed", "-1"),
    _flag("slo-inf", ("--slo", "finite number above 0 ms"), "--slo", "ttft_ms=inf"),
    _flag("slo-twice", ("--slo", "ttft_ms is given twice"), "--slo", "ttft_ms=500,ttft_ms=1"),
    _flag("server-device-lines", ("--server-device", "one line"), "--server-device", "a\nb"),
    _flag("plot-suffix", ("--plot", "name a .png or .svg"), "--plot", "{tmp}/p.txt"),
    _flag(
        "replay-nan-time",
        ("--replay", "line 1: a finite time"),
        "--replay",
        "{replay}",
        setup=_file("replay", "replay.jsonl", b'{"time": NaN, "prompt_len": 1, "output_len": 1}\n'),
    ),
    _flag(
        "dataset-binary",
        ("--dataset", "is not UTF-8 text"),
        "--dataset",
        "{prompts}",
        setup=_file("prompts", "prompts.jsonl", b"\x00\xff\xfe binary\n"),
    ),
    _flag(
        "tokenizer-truncated",
        ("--tokenizer", "is not a tokenizer file"),
        "--tokenizer",
        "{tmp}/tok",
        setup=_file("tokjson", "tok/tokenizer.json", b'{"model": {"type": "BPE", "vo'),
    ),
]

CASES = [*FAULTS, *USAGES, *FLAGS]
