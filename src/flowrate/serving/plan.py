"""From serve-bench's options to a run: the prompts, the load plan, the Result."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from flowrate.config.serve import MAX_PROMPT_TOKENS, MAX_TOKENS, Arrivals, Scenario, ServeConfig
from flowrate.errors import ConfigError, RunFailed
from flowrate.process_clock import command_start
from flowrate.results.environment import environment_from
from flowrate.results.schema import SCHEMA_VERSION, Result
from flowrate.results.serving import RequestTrace, Serving, length_spec
from flowrate.results.validate import InvalidResult, validate_record
from flowrate.serving import bench, capacity, conversations, lengths, load, prompts, server_metrics, sweep
from flowrate.serving.metrics import Slo
from flowrate.serving.prompts import LocalTokenizer, Prompt, SharedPrefix
from flowrate.serving.result import build_result, serving_section
from flowrate.serving.search import INTERRUPTED, SearchSettings

SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")


def parse_slo(text: str | None) -> dict[str, float] | None:
    """ttft_ms=500,tpot_ms=50 (any of ttft_ms, tpot_ms, e2e_ms, each once, each finite > 0)."""
    if not text:
        return None
    out: dict[str, float] = {}
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or key not in SLO_KEYS:
            raise ConfigError("--slo", f"{part!r}: expected KEY=MS with KEY one of {', '.join(SLO_KEYS)}")
        if key in out:
            raise ConfigError("--slo", f"{key} is given twice; give each limit once")
        try:
            out[key] = float(value)
        except ValueError:
            raise ConfigError("--slo", f"{part!r}: {value!r} is not a number of milliseconds") from None
        if not 0 < out[key] < math.inf:
            raise ConfigError("--slo", f"{part!r}: a limit must be a finite number above 0 ms")
    return out


def server_environment(client: dict[str, Any], section: Serving) -> dict[str, Any]:
    """The environment of a serving run: the device under test is the server (what --server-device
    says it runs on, else its URL), not the client's CPU, which is kept as ``client_device``."""
    device = {"type": "remote", "name": section.server_device or f"server at {section.url}"}
    return {**client, "device": device, "client_device": client.get("device")}


def _server_device(text: str | None) -> str | None:
    """--server-device: one short line of text, or None when not given."""
    if text is None:
        return None
    if not text.strip() or len(text) > 200 or not text.isprintable():
        raise ConfigError("--server-device", "one line of printable text, at most 200 characters")
    return text.strip()


def _check_total(chosen: list[Prompt]) -> None:
    """Refuse prompts whose tokens (by the tokenizer) together exceed MAX_PROMPT_TOKENS: a
    dataset cycled to -n prompts. Synthetic and replayed ones are checked before they are made."""
    total = sum(p.tokens or 0 for p in chosen)
    if total > MAX_PROMPT_TOKENS:
        raise ConfigError("--dataset", f"the prompts hold {total} tokens; at most {MAX_PROMPT_TOKENS} in all")


@dataclass
class Plan:
    target: bench.Target
    prompts: list[Prompt]
    times: list[float] | None  # open-loop send times; None: closed loop at `concurrency`
    concurrency: int
    deadline_s: float
    tokenizer: LocalTokenizer | None
    slo: dict[str, float] | None
    settings: dict[str, Any]  # what the serving section records about the load
    search: SearchSettings | None = None  # --find-max-rate
    calibrate: bool = False  # synthetic prompts without a tokenizer: sized by the server's counts
    started: float = field(default_factory=command_start)  # --budget counts from here
    warmup: list[Prompt] = field(default_factory=list)  # --warmup's prompts, sent first
    prefix: SharedPrefix | None = None  # --shared-prefix-len
    server_metrics: bool = False  # --server-metrics: scrape the server's /metrics around the load
    loads: list[sweep.Load] | None = None  # a sweep's loads (--rate or --concurrency lists)
    budget_s: float | None = None  # a sweep's --budget
    verdicts: sweep.Verdicts | None = None  # a sweep's points held to --slo
    conversations: bench.Conversations | None = None  # --turns

    def start_line(self) -> str:
        s = self.settings
        if self.search is not None:
            head = f"serve-bench: a rate search at {self.target.url} ({self.target.model})"
            return "\n".join([head, *capacity.plan_lines(self.search)])
        how = f"at {s['rate']} req/s" if s["rate"] else f"at concurrency {s['concurrency']}"
        how = "replaying a trace" if s["replay"] else how
        if self.loads is not None:
            how = "at " + ", ".join(load.label for load in self.loads) + ", in turn"
        sent = f"{len(self.prompts)} requests"
        if self.conversations is not None:
            sent = f"{len(self.conversations.turns)} conversations ({len(self.prompts)} turns)"
        return f"serve-bench: {sent} to {self.target.url} ({self.target.model}) {how}"


def _load(
    config: ServeConfig, rate: float | None, concurrency: int | None
) -> tuple[float | None, int, str | None]:
    """The rate (inf: offline), the concurrency, and the scenario's name after its rules, given
    the first load (a sweep's others follow the same rules)."""
    scenario = None if config.scenario is None else str(config.scenario)
    given = {"rate": rate, "concurrency": concurrency, "replay": config.replay}
    chosen = [name for name, value in given.items() if value is not None]
    if len(chosen) > 1:
        raise ConfigError(
            "--" + chosen[1], f"choose one of --rate, --concurrency, --replay, not {' and '.join(chosen)}"
        )
    if scenario == Scenario.OFFLINE:  # LoadGen offline: every query issued at the start
        if chosen:
            raise ConfigError("--scenario", "offline sends every request at once: drop --" + chosen[0])
        return math.inf, 1, scenario
    if scenario == Scenario.SINGLE_STREAM:  # LoadGen single-stream: the next query when one completes
        if chosen:
            raise ConfigError("--scenario", "single-stream sends one request at a time: drop --" + chosen[0])
        return None, 1, scenario
    # LoadGen server: Poisson arrivals at a target rate
    if scenario == Scenario.SERVER and (
        rate is None or config.burstiness != 1.0 or config.arrivals != Arrivals.POISSON
    ):
        raise ConfigError("--scenario", "server needs --rate and Poisson arrivals (--burstiness 1)")
    if config.arrivals == Arrivals.CONSTANT and config.burstiness != 1.0:
        raise ConfigError("--burstiness", "shapes random gaps: constant arrivals have none (drop one)")
    if rate is None and config.replay is None:
        return None, concurrency or 1, scenario
    return rate, 1, scenario


def _arrivals(config: ServeConfig) -> str:
    if config.arrivals == Arrivals.CONSTANT:
        return "constant"
    return "poisson" if config.burstiness == 1.0 else "gamma"


def _first_load(config: ServeConfig) -> tuple[float | None, int | None, list[sweep.Load] | None]:
    """--rate and --concurrency as lists: the first load, and a sweep's loads (None for one)."""
    loads = sweep.loads_from(config.rate, config.concurrency)
    if loads is not None:
        sweep.check_config(config)
    rate = config.rate[0] if config.rate else None
    return rate, config.concurrency[0] if config.concurrency else None, loads


def resolve(config: ServeConfig) -> Plan:
    """Check every setting before anything is sent."""
    bench.split_url(config.url)
    slo = parse_slo(config.slo)
    first_rate, first_concurrency, loads = _first_load(config)
    rate, concurrency, scenario = _load(config, first_rate, first_concurrency)
    search = capacity.settings_from(config, rate, slo, sweep=loads is not None)
    tokenizer = prompts.load_tokenizer(Path(config.tokenizer)) if config.tokenizer else None
    n, seed, warmup = config.num_requests, config.seed, config.warmup
    talks = conversations.from_config(config, n, seed)
    n = n if talks is None else sum(talks.turns)  # the requests: every conversation's turns
    if warmup and search is not None:
        raise ConfigError("--warmup", "not with --find-max-rate (each point is measured whole)")
    if config.server_metrics and search is not None:
        raise ConfigError("--server-metrics", "not with --find-max-rate (scrape a single load)")
    output_len = lengths.parse(config.output_len, "--output-len")
    prefix = _shared_prefix(config, seed)
    replayed = load.read_replay(Path(config.replay), MAX_TOKENS, MAX_PROMPT_TOKENS) if config.replay else None
    warm: list[Prompt] = []
    if replayed is not None:
        pairs = [(p.prompt_len or 1, p.output_len or 1) for p in replayed]
        chosen = prompts.synthetic(len(pairs), (1, 1), (1, 1), tokenizer, seed, fixed=pairs)
        warm = [chosen[i % len(chosen)] for i in range(warmup)]  # the trace's first prompts again
        times: list[float] | None = [p.at_s for p in replayed]
    else:
        if config.dataset:
            outputs = output_len.draw(n, np.random.default_rng(seed))
            chosen = prompts.dataset(Path(config.dataset), n, outputs, tokenizer)
            warm = [chosen[i % len(chosen)] for i in range(warmup)]  # the dataset's first prompts again
        else:
            input_len = lengths.parse(config.input_len, "--input-len")
            pairs = _draw(n, input_len, output_len, seed)
            warm_pairs = _draw(warmup, input_len, output_len, seed, stream=1)
            shared = prefix.tokens * (n + warmup + prefix.groups) if prefix else 0
            if sum(p for p, _ in pairs + warm_pairs) + shared > MAX_PROMPT_TOKENS:
                raise ConfigError(
                    "--input-len",
                    f"{n + warmup} prompts drawn from {config.input_len!r} exceed {MAX_PROMPT_TOKENS} "
                    "tokens in all",
                )
            chosen = prompts.synthetic(n, (1, 1), (1, 1), tokenizer, seed, fixed=pairs, prefix=prefix)
            warm = prompts.synthetic(warmup, (1, 1), (1, 1), tokenizer, seed, fixed=warm_pairs, prefix=prefix)
        starts = n if talks is None else len(talks.turns)  # with --turns the load starts conversations
        times = (
            None
            if rate is None
            else load.arrival_times(
                starts, rate, config.burstiness, config.ramp_up, seed, config.arrivals == "constant"
            )
        )
    _check_total(chosen)
    context = config.max_model_len or (tokenizer.context if tokenizer else None)
    prompts.check_context(chosen, context)
    if talks is not None:
        conversations.check_context(chosen, talks, context)
    target = bench.Target(
        config.url.rstrip("/"),
        config.model,
        config.endpoint,
        config.connect_timeout,
        config.request_timeout,
    )
    settings: dict[str, Any] = {
        "url": target.url,
        "model": target.model,
        "endpoint": target.endpoint,
        "scenario": scenario,
        "rate": rate if rate is None or math.isfinite(rate) else "inf",
        "burstiness": config.burstiness,
        # how the gaps between sends are drawn: constant, poisson, or gamma (--burstiness != 1)
        "arrivals": _arrivals(config),
        "ramp_up_s": config.ramp_up,
        "concurrency": concurrency if times is None else None,
        "replay": config.replay,
        "dataset": config.dataset,
        # the lengths asked for, as a spec (serving.lengths: N, LOW:HIGH, normal:, lognormal:, file:;
        # one spelling each: results.serving.length_spec); each request's drawn lengths are in its
        # trace (input_len, max_tokens). A replay's lengths come from its file
        "input_len": None if config.replay or config.dataset else length_spec(config.input_len),
        "output_len": None if config.replay else length_spec(config.output_len),
        "tokenizer": config.tokenizer,
        # how a request's output tokens are counted (serving.usage)
        "token_counts": "server usage if consistent with the stream, else "
        + ("the tokenizer's count of the text" if tokenizer else "one per chunk with text"),
        "slo": slo,
        "seed": config.seed,
        # --server-metrics: the server's own figures over the load (serving.server_metrics)
        "server_metrics": None,
        "warmup": warmup,  # requests sent first and kept out of every figure (traces marked warmup)
        # each prompt starts with one of prefix_groups shared prefixes of this many tokens (None:
        # no shared prefix); input_len is then the length after it
        "shared_prefix_len": prefix.tokens if prefix else None,
        "prefix_groups": prefix.groups if prefix else None,
        "server_device": _server_device(config.server_device),
        # --turns: the spec of each conversation's turns (-n counts conversations) and the
        # seconds between an answer and the next turn; None for single-turn requests
        "turns": config.turns if talks else None,
        "conversations": len(talks.turns) if talks else None,
        "think_time_s": talks.think_time_s if talks else None,
    }
    return Plan(
        target,
        chosen,
        times,
        concurrency,
        config.deadline,
        tokenizer,
        slo,
        settings,
        search=search,
        calibrate=tokenizer is None and not config.dataset,
        warmup=warm,
        prefix=prefix,
        server_metrics=bool(config.server_metrics),
        loads=loads,
        budget_s=config.budget,
        verdicts=None
        if loads is None or not slo
        else sweep.Verdicts(slo, (config.slo_percentile or 99.0) / 100, config.confidence or 0.95),
        conversations=talks,
    )


def _shared_prefix(config: ServeConfig, seed: int) -> SharedPrefix | None:
    """--shared-prefix-len and --prefix-groups, for synthetic prompts only."""
    tokens, groups = config.shared_prefix_len or 0, config.prefix_groups
    if not tokens:
        if groups is not None:
            raise ConfigError("--prefix-groups", "only with --shared-prefix-len N (N >= 1)")
        return None
    for source in ("dataset", "replay"):
        if getattr(config, source):
            raise ConfigError("--shared-prefix-len", f"synthetic prompts only: drop --{source}")
    return SharedPrefix(tokens, groups or 1, seed)


def _draw(
    n: int, input_len: lengths.LengthSpec, output_len: lengths.LengthSpec, seed: int, stream: int = 0
) -> list[tuple[int, int]]:
    """n (input, output) lengths, the inputs drawn first; stream 1 (--warmup's) is a generator of
    its own, so the measured requests' lengths do not depend on --warmup."""
    rng = np.random.default_rng(seed if stream == 0 else [seed, stream])
    drawn_in = input_len.draw(n, rng)
    return list(zip(drawn_in, output_len.draw(n, rng), strict=True))


def calibrate(plan: Plan) -> None:
    """Size the synthetic prompts by the server's own counts (prompts.py says how), recorded as
    the settings' prompt_calibration; the probes' time comes out of --deadline."""
    begin = time.perf_counter()
    try:
        counts = bench.prompt_tokens(plan.target, prompts.calibration_texts(), plan.deadline_s)
    except TimeoutError:
        raise RunFailed(
            f"the prompt-length probes of {plan.target.url} took the whole --deadline "
            f"({plan.deadline_s:g} s); no load was sent"
        ) from None
    plan.deadline_s -= time.perf_counter() - begin
    costs = prompts.WordCosts.from_counts(counts)
    if isinstance(costs, str):
        plan.settings["prompt_calibration"] = {"calibrated": False, "reason": costs}  # a warning
        return
    plan.prompts = prompts.calibrated(plan.prompts, costs, plan.prefix)
    plan.warmup = prompts.calibrated(plan.warmup, costs, plan.prefix)
    plan.settings["prompt_calibration"] = {"calibrated": True, "first": costs.first, "after": costs.after}


def execute(plan: Plan, argv: list[str], say: Callable[[str], None]) -> Result:
    """Run the plan (or the rate search) and build the Result."""
    import torch

    from flowrate.measure.env import collect_environment

    client = collect_environment(torch.device("cpu"), argv)  # first: a search ends soon after its budget
    slo = Slo(**plan.slo) if plan.slo else None
    if plan.calibrate:
        calibrate(plan)
    settings, search, partial = plan.settings, None, False
    if plan.search is not None:
        runner = capacity.Runner(
            plan.target,
            plan.prompts,
            plan.settings,
            plan.search.requests,
            list(plan.search.slo),
            plan.deadline_s,
            plan.tokenizer,
        )
        outcome, rate, search = capacity.run_search(runner, plan.search, say, plan.started)
        settings = {**plan.settings, "rate": rate}  # the headline point's load
        partial = search.stopped == INTERRUPTED
    else:
        scrapes: dict[str, server_metrics.Snapshot | str] = {}

        def observe(phase: str) -> None:
            scrapes[phase] = server_metrics.scrape(plan.target.url, plan.target.connect_timeout_s)

        outcome = bench.run(
            plan.target,
            plan.prompts,
            times=plan.times,
            concurrency=plan.concurrency,
            deadline_s=plan.deadline_s,
            tokenizer=plan.tokenizer,
            warmup=plan.warmup,
            observe=observe if plan.server_metrics else None,
            conversations=plan.conversations,
        )
        partial = outcome.partial
        if plan.server_metrics:
            scraped = server_metrics.record(scrapes.get("before"), scrapes.get("after"))
            settings = {**settings, "server_metrics": scraped}
    section = serving_section(outcome.traces, slo, settings, partial)
    if search is not None:
        section = dataclasses.replace(section, search=search)
    return record(outcome.traces, section, client)


def record(traces: list[RequestTrace], section: Serving, client: dict[str, Any]) -> Result:
    """The Result of one load's traces, checked to read back before anything is written."""
    environment = environment_from(server_environment(client, section))
    result = build_result(traces, section, environment)
    try:  # what readers refuse is never written: check the record before anything is
        validate_record(result.to_dict(), SCHEMA_VERSION)
    except InvalidResult as error:
        raise RunFailed(f"the run's record would not read back ({error}); nothing was written") from None
    return result
