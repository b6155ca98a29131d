"""`flowrate serve-bench`: load tests of a running server speaking the OpenAI API."""

from __future__ import annotations

import math
from typing import Any

import click

from flowrate.cli.options import output_options
from flowrate.cli.param_types import Duration, FiniteRange
from flowrate.serving.bounds import MAX_REQUESTS, MAX_TOKENS

SCENARIO_HELP = (
    "MLPerf LoadGen's scenarios: offline (every request at once; the figure is throughput), server "
    "(Poisson arrivals at --rate; p99 TTFT/TPOT against --slo), single-stream (one request at a time; "
    "the figure is p90 latency). LoadGen's 600 s minimum duration is not enforced: set --num-requests."
)


class Rate(click.FloatRange):
    """--rate: requests/s above 0, or inf (every request at once); nan is refused."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail("nan is not a rate: give requests/s above 0, or inf for all at once.", param, ctx)
        return number


class Loads(click.ParamType):
    """A load, or a comma-separated list of them: a sweep, one point a load, in the order given."""

    def __init__(self, one: click.ParamType) -> None:
        self.one, self.name = one, one.name

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        return tuple(self.one.convert(part.strip(), param, ctx) for part in str(value).split(","))


@click.command("serve-bench")
@click.option("--url", required=True, help="The server's base URL, e.g. http://127.0.0.1:8000.")
@click.option("--model", required=True, help="The model name the server expects.")
@click.option(
    "--endpoint", type=click.Choice(["completions", "chat"]), default="completions", show_default=True
)
@click.option(
    "--tokenizer",
    type=click.Path(file_okay=False),
    help="Local folder with tokenizer.json: token-exact prompts.",
)
@click.option(
    "--dataset", type=click.Path(dir_okay=False), help='JSONL prompts: {"prompt": …, "output_len": …}.'
)
@click.option("--num-requests", "-n", type=click.IntRange(1, MAX_REQUESTS), default=100, show_default=True)
@click.option(
    "--input-len",
    default="128",
    show_default=True,
    help="Prompt tokens: N, LOW:HIGH or uniform:LOW,HIGH, normal:MEAN,STD, lognormal:MEDIAN,SIGMA "
    "(SIGMA of the log-length), file:PATH (one a line) or file:PATH.csv#COLUMN / PATH.jsonl#FIELD; "
    "drawn with --seed; exact with --tokenizer, else as the server counts them.",
)
@click.option(
    "--output-len", default="128", show_default=True, help="max_tokens: a spec as --input-len takes."
)
@click.option(
    "--shared-prefix-len",
    type=click.IntRange(0, MAX_TOKENS),
    default=0,
    show_default=True,
    help="Each prompt starts with a shared prefix of N tokens (prefix caching), then its own "
    "--input-len tokens; exact with --tokenizer, else sized by the server's counts.",
)
@click.option(
    "--prefix-groups",
    type=click.IntRange(1, 100_000),
    help="K distinct shared prefixes: prompt i starts with prefix i mod K. [default: 1]",
)
@click.option(
    "--server-metrics",
    is_flag=True,
    help="Scrape the server's Prometheus /metrics (vLLM, SGLang, TGI) before and after the load: "
    "its queue time, TTFT and KV-cache figures recorded beside the client's.",
)
@click.option(
    "--warmup",
    type=click.IntRange(0, MAX_REQUESTS),
    default=0,
    show_default=True,
    help="Requests sent first (at the load's concurrency) and kept out of every figure; their "
    "traces are kept, marked warmup.",
)
@click.option(
    "--rate",
    type=Loads(Rate(min=0, min_open=True)),
    help="Arrival rate, requests/s (open loop); inf sends every request at once. A list (0.5,1,2) "
    "sweeps the rates in turn: each a run of its own, then their curve.",
)
@click.option(
    "--arrivals",
    type=click.Choice(["poisson", "constant"]),
    default="poisson",
    show_default=True,
    help="Gaps between sends at --rate: random (poisson; gamma with --burstiness) or exactly 1/rate.",
)
@click.option(
    "--burstiness",
    type=FiniteRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Gamma shape of the gaps: 1 = Poisson, < 1 burstier.",
)
@click.option(
    "--ramp-up", type=FiniteRange(min=0), default=0.0, show_default=True, help="Seconds to reach --rate."
)
@click.option(
    "--concurrency",
    type=Loads(click.IntRange(1)),
    help="Fixed concurrency (closed loop) instead of a rate. A list (1,4,16) sweeps them in turn.",
)
@click.option(
    "--turns",
    help="Multi-turn conversations (--endpoint chat): turns per conversation, a spec as --input-len "
    "takes; -n counts conversations, each turn is sent with the earlier turns' prompts and answers.",
)
@click.option(
    "--think-time",
    type=FiniteRange(min=0),
    help="--turns: seconds between an answer and the conversation's next turn. [default: 0]",
)
@click.option(
    "--replay", type=click.Path(dir_okay=False), help="JSONL trace: {time, prompt_len, output_len}."
)
@click.option("--scenario", type=click.Choice(["offline", "server", "single-stream"]), help=SCENARIO_HELP)
@click.option("--slo", help="ttft_ms=…,tpot_ms=…,e2e_ms=…: goodput counts requests meeting all.")
@click.option(
    "--find-max-rate",
    is_flag=True,
    help="Search for the highest rate (from --rate) whose --slo-percentile latencies meet --slo, "
    "within --budget; the plan and its estimate are shown first.",
)
@click.option(
    "--budget",
    type=Duration(),
    help="--find-max-rate's time limit, e.g. 3m, 90s, 1h: no point starts that would not fit. [default: 10m] "
    "A sweep's: no point starts once it is spent, the running one is cut at its end.",
)
@click.option(
    "--slo-percentile",
    type=FiniteRange(50, 99.9),
    help="--find-max-rate: the latency percentile held to --slo. [default: 99]",
)
@click.option(
    "--confidence",
    type=FiniteRange(0.5, 0.999),
    help="--find-max-rate: the confidence a passing rate's percentile meets --slo with; with "
    "--slo-percentile it sets the requests a point sends. [default: 0.95]",
)
@click.option(
    "--resolution",
    type=FiniteRange(0.001, 0.5),
    help="--find-max-rate: bisect until the bracket is within this share of its top. [default: 0.05]",
)
@click.option(
    "--max-error-rate",
    type=FiniteRange(0, 1),
    default=0.0,
    show_default=True,
    help="The run fails when more requests than this share fail.",
)
@click.option(
    "--max-model-len",
    type=click.IntRange(1),
    help="The model's context (else the tokenizer folder's config).",
)
@click.option(
    "--timeout",
    "request_timeout",
    type=FiniteRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="Seconds one request may take.",
)
@click.option(
    "--connect-timeout",
    type=FiniteRange(min=0, min_open=True),
    default=5.0,
    show_default=True,
    help="Seconds to connect and receive a response's headers (a streaming server sends them at once).",
)
@click.option(
    "--deadline",
    type=FiniteRange(min=0, min_open=True),
    default=3600.0,
    show_default=True,
    help="Seconds the whole load may take; unfinished requests are then cancelled.",
)
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True)
@click.option(
    "--server-device",
    help="What the server runs on, e.g. '1x H100 80GB' (recorded as the serving section's server_device).",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    help="Also write latency CDFs (and the rate search) here.",
)
@output_options
def command(
    store: str | None,
    tags: tuple[str, ...],
    no_store: bool,
    as_json: bool,
    out: str | None,
    quiet: bool,
    **flags: Any,
) -> None:
    """Load-test a server speaking the OpenAI API (vLLM, SGLang, TGI, llama.cpp, Ollama,
    transformers serve): TTFT, TPOT, ITL and E2E with confidence intervals, throughput, errors and
    goodput, each under flowrate's, vLLM's and genai-perf's definitions from one raw trace."""
    import sys

    from flowrate.cli import console, serve_bench_text
    from flowrate.cli.destination import Destination
    from flowrate.cli.paths import check_out
    from flowrate.errors import ConfigError, RunFailed

    try:
        import aiohttp  # noqa: F401  (the client's library, from the serve extra)
    except ImportError:
        raise ConfigError("serve-bench", "needs aiohttp: pip install 'flowrate[serve]'") from None
    from flowrate.serving import plan as serving_plan

    plan = serving_plan.resolve(flags)
    if plan.loads is not None:
        for given, flag in ((out, "--out"), (as_json, "--json")):
            if given:
                raise ConfigError(
                    flag, "a sweep records each load as a run of its own: read them from the store"
                )
    if out:
        check_out(out)
    if flags["plot_path"]:
        check_out(flags["plot_path"], "plot")
        _plot_format(flags["plot_path"])
    destination = Destination.open(store, tags, no_store, out, quiet, as_json)
    console.status(plan.start_line(), quiet)
    if plan.loads is not None:
        _sweep(plan, destination, flags, quiet)
        return
    result = serving_plan.execute(plan, sys.argv, lambda line: console.status(line, quiet))
    section = result.serving or {}
    title = f"flowrate serve-bench {result.run_id}"
    rows = serve_bench_text.rows(section)
    if "search" in section:
        rows += serve_bench_text.search_rows(section["search"])
    destination.report(result, title, rows)
    if flags["plot_path"]:
        _plot(section, title, flags["plot_path"], quiet)
    if section.get("partial"):
        raise KeyboardInterrupt  # recorded as partial; the boundary says "interrupted", exit 130
    if "search" in section:  # its points count failed requests as missing the SLO
        if section["search"]["max_rate"] is None:
            raise RunFailed(f"no rate met the SLO ({section['search']['stopped']}); every point is recorded")
        return
    failure = serve_bench_text.failure(section, flags["max_error_rate"])
    if failure:
        raise RunFailed(failure)


def _sweep(plan: Any, destination: Any, flags: dict[str, Any], quiet: bool) -> None:
    """Each point recorded as its run, the curve's table, its figure; exit 130 when cut by
    Ctrl-C, 1 when a point failed as a single load fails (serve_bench_text.failure)."""
    import sys

    from flowrate.cli import console, serve_bench_text
    from flowrate.errors import RunFailed
    from flowrate.serving import sweep_run

    done = sweep_run.execute_sweep(plan, sys.argv, lambda line: console.status(line, quiet))
    destination.record_all(done.results)
    if not quiet:
        header, rows = serve_bench_text.curve_table(done.curve, [r.run_id for r in done.results])
        console.grid(
            f"serve-bench sweep ({done.stopped})",
            header,
            rows,
            right_aligned=range(1, 6),
            to_stdout=False,
            whole=(0, 7),
        )
    if flags["plot_path"]:
        from flowrate.analysis.plots import render
        from flowrate.analysis.plots_serving import sweep_figure
        from flowrate.io import write_atomic

        figure = sweep_figure(done.curve, plan.slo or {}, f"serve-bench sweep at {plan.target.url}")
        write_atomic(flags["plot_path"], render(figure, _plot_format(flags["plot_path"])))
        console.status(f"plot written to {flags['plot_path']}", quiet)
    if any(point["cut"] == "interrupted" for point in done.curve) or done.stopped == "interrupted":
        raise KeyboardInterrupt  # the points are recorded, the cut one partial: exit 130
    failures = [
        f"{point['load']}: {why}"
        for point, result in zip(done.curve, done.results, strict=True)
        if not point["partial"]
        and (why := serve_bench_text.failure(result.serving or {}, flags["max_error_rate"]))
    ]
    if failures:
        raise RunFailed("; ".join(failures))


def _plot_format(path: str) -> str:
    """The image format --plot's suffix names, refused before any request when unknown."""
    from flowrate.analysis.plots import format_for
    from flowrate.errors import ConfigError, FlowrateError

    try:
        return format_for(path)
    except FlowrateError as error:
        raise ConfigError("--plot", str(error)) from None


def _plot(section: dict[str, Any], title: str, path: str, quiet: bool) -> None:
    from flowrate.analysis.plots import render
    from flowrate.analysis.plots_serving import serving_figure
    from flowrate.cli import console
    from flowrate.io import write_atomic

    write_atomic(path, render(serving_figure(section, title), _plot_format(path)))
    console.status(f"plot written to {path}", quiet)
