"""serve-bench's settings, declared once: each field of ServeConfig carries its Setting (flags,
help, default, bounds), from which `flowrate serve-bench`'s options and their checks are made
(flowrate.cli.serve_options) and against which a ServeConfig built in code is checked.

The bounds on one run's size (MAX_TOKENS, MAX_REQUESTS, MAX_PROMPT_TOKENS) are far above any
server's context or a day's load, low enough that the prompts are made in memory, in seconds,
before anything is sent.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from flowrate.config.bounds import Bounds
from flowrate.config.setting import setting, settings

MAX_TOKENS = 1 << 24  # one prompt's or one output's length, in tokens
MAX_REQUESTS = 10_000_000  # -n
MAX_PROMPT_TOKENS = 1 << 28  # all the prompts' tokens together (about 1.5 GB of text)

# click's own ranges say these (1<=x<=10000000, x>=1, 0<x): the builder keeps their wording
REQUESTS = Bounds("an integer from 1 to 10000000", 1, MAX_REQUESTS)
TOKENS = Bounds(f"an integer from 0 to {MAX_TOKENS}", 0, MAX_TOKENS)
WARMUP = Bounds("an integer from 0 to 10000000", 0, MAX_REQUESTS)
GROUPS = Bounds("an integer from 1 to 100000", 1, 100_000)
FROM_1 = Bounds("an integer from 1", 1, math.inf)
FROM_0 = Bounds("an integer from 0", 0, math.inf)
ABOVE_0 = Bounds("a finite number above 0", 0, math.inf, integer=False, low_open=True)
AT_LEAST_0 = Bounds("a finite number 0 or more", 0, math.inf, integer=False)
SHARE = Bounds("a number from 0 to 1", 0, 1, integer=False)
PERCENTILE = Bounds("a number from 50 to 99.9", 50, 99.9, integer=False)
CONFIDENCE = Bounds("a number from 0.5 to 0.999", 0.5, 0.999, integer=False)
RESOLUTION = Bounds("a number from 0.001 to 0.5", 0.001, 0.5, integer=False)

SCENARIO_HELP = (
    "MLPerf LoadGen's scenarios: offline (every request at once; the figure is throughput), server "
    "(Poisson arrivals at --rate; p99 TTFT/TPOT against --slo), single-stream (one request at a time; "
    "the figure is p90 latency). LoadGen's 600 s minimum duration is not enforced: set --num-requests."
)


class Endpoint(enum.StrEnum):
    COMPLETIONS = "completions"
    CHAT = "chat"


class Arrivals(enum.StrEnum):
    POISSON = "poisson"
    CONSTANT = "constant"


class Scenario(enum.StrEnum):
    OFFLINE = "offline"
    SERVER = "server"
    SINGLE_STREAM = "single-stream"


@dataclass(frozen=True)
class ServeConfig:
    """One `flowrate serve-bench` command: the server, the prompts, the load, the limits."""

    url: str = setting(help="The server's base URL, e.g. http://127.0.0.1:8000.", kind="text")
    model: str = setting(help="The model name the server expects.", kind="text")
    endpoint: Endpoint = setting(Endpoint.COMPLETIONS, help="")
    tokenizer: str | None = setting(
        None, help="Local folder with tokenizer.json: token-exact prompts.", kind="folder"
    )
    dataset: str | None = setting(None, help='JSONL prompts: {"prompt": …, "output_len": …}.', kind="text")
    num_requests: int = setting(100, help="", flags=("--num-requests", "-n"), bounds=REQUESTS)
    input_len: str = setting(
        "128",
        help="Prompt tokens: N, LOW:HIGH or uniform:LOW,HIGH, normal:MEAN,STD, lognormal:MEDIAN,SIGMA "
        "(SIGMA of the log-length), file:PATH (one a line) or file:PATH.csv#COLUMN / PATH.jsonl#FIELD; "
        "drawn with --seed; exact with --tokenizer, else as the server counts them.",
        kind="text",
    )
    output_len: str = setting("128", help="max_tokens: a spec as --input-len takes.", kind="text")
    shared_prefix_len: int = setting(
        0,
        help="Each prompt starts with a shared prefix of N tokens (prefix caching), then its own "
        "--input-len tokens; exact with --tokenizer, else sized by the server's counts.",
        bounds=TOKENS,
    )
    prefix_groups: int | None = setting(
        None,
        help="K distinct shared prefixes: prompt i starts with prefix i mod K.",
        default_help="1",
        bounds=GROUPS,
    )
    server_metrics: bool = setting(
        False,
        help="Scrape the server's Prometheus /metrics (vLLM, SGLang, TGI) before and after the load: "
        "its queue time, TTFT and KV-cache figures recorded beside the client's.",
    )
    warmup: int = setting(
        0,
        help="Requests sent first (at the load's concurrency) and kept out of every figure; their "
        "traces are kept, marked warmup.",
        bounds=WARMUP,
    )
    rate: tuple[float, ...] | None = setting(
        None,
        help="Arrival rate, requests/s (open loop); inf sends every request at once. A list (0.5,1,2) "
        "sweeps the rates in turn: each a run of its own, then their curve.",
        kind="text",
        unit="requests/s",
    )
    arrivals: Arrivals = setting(
        Arrivals.POISSON,
        help="Gaps between sends at --rate: random (poisson; gamma with --burstiness) or exactly 1/rate.",
    )
    burstiness: float = setting(
        1.0, help="Gamma shape of the gaps: 1 = Poisson, < 1 burstier.", bounds=ABOVE_0
    )
    ramp_up: float = setting(0.0, help="Seconds to reach --rate.", bounds=AT_LEAST_0, unit="s")
    concurrency: tuple[int, ...] | None = setting(
        None,
        help="Fixed concurrency (closed loop) instead of a rate. A list (1,4,16) sweeps them in turn.",
        kind="text",
    )
    turns: str | None = setting(
        None,
        help="Multi-turn conversations (--endpoint chat): turns per conversation, a spec as --input-len "
        "takes; -n counts conversations, each turn is sent with the earlier turns' prompts and answers.",
        kind="text",
    )
    think_time: float | None = setting(
        None,
        help="--turns: seconds between an answer and the conversation's next turn.",
        default_help="0",
        bounds=AT_LEAST_0,
        unit="s",
    )
    replay: str | None = setting(None, help="JSONL trace: {time, prompt_len, output_len}.", kind="text")
    scenario: Scenario | None = setting(None, help=SCENARIO_HELP)
    slo: str | None = setting(
        None, help="ttft_ms=…,tpot_ms=…,e2e_ms=…: goodput counts requests meeting all.", kind="text"
    )
    find_max_rate: bool = setting(
        False,
        help="Search for the highest rate (from --rate) whose --slo-percentile latencies meet --slo, "
        "within --budget; the plan and its estimate are shown first.",
    )
    budget: float | None = setting(
        None,
        help="--find-max-rate's time limit, e.g. 3m, 90s, 1h: no point starts that would not fit. "
        "[default: 10m] A sweep's: no point starts once it is spent, the running one is cut at its end.",
        bounds=ABOVE_0,
        unit="s",
    )
    slo_percentile: float | None = setting(
        None,
        help="--find-max-rate: the latency percentile held to --slo.",
        default_help="99",
        bounds=PERCENTILE,
    )
    confidence: float | None = setting(
        None,
        help="--find-max-rate: the confidence a passing rate's percentile meets --slo with; with "
        "--slo-percentile it sets the requests a point sends.",
        default_help="0.95",
        bounds=CONFIDENCE,
    )
    resolution: float | None = setting(
        None,
        help="--find-max-rate: bisect until the bracket is within this share of its top.",
        default_help="0.05",
        bounds=RESOLUTION,
    )
    max_error_rate: float = setting(
        0.0, help="The run fails when more requests than this share fail.", bounds=SHARE
    )
    max_model_len: int | None = setting(
        None, help="The model's context (else the tokenizer folder's config).", bounds=FROM_1
    )
    request_timeout: float = setting(
        300.0, help="Seconds one request may take.", flags=("--timeout",), bounds=ABOVE_0, unit="s"
    )
    connect_timeout: float = setting(
        5.0,
        help="Seconds to connect and receive a response's headers (a streaming server sends them at once).",
        bounds=ABOVE_0,
        unit="s",
    )
    deadline: float = setting(
        3600.0,
        help="Seconds the whole load may take; unfinished requests are then cancelled.",
        bounds=ABOVE_0,
        unit="s",
    )
    seed: int = setting(0, help="", bounds=FROM_0)
    server_device: str | None = setting(
        None,
        help="What the server runs on, e.g. '1x H100 80GB' (recorded as the serving section's "
        "server_device).",
        kind="text",
    )
    plot_path: str | None = setting(
        None,
        help="Also write latency CDFs (and the rate search) here.",
        flags=("--plot",),
        kind="text",
    )

    def __post_init__(self) -> None:
        """Each bounded setting within its bounds (ConfigError naming it), the rest as typed."""
        for found in settings(ServeConfig):
            found.check(getattr(self, found.name))
