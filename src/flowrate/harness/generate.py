"""`flowrate generate`: greedy generation with a KV cache, prefill and decode timed apart.

Each generation hands B synthetic prompts of P tokens to the model (the prefill, which yields the
first token) and then feeds back one argmax token per sequence per step until n_out tokens exist
(fixed length: no end-of-sequence stop). Every token's moment is recorded (generate_timing.py).
transformers' ``generate`` is not used for hf: models: its per-token hook (a streamer) sits after
the logits processors and stopping criteria, so the same manual loop over ``model(…,
past_key_values=cache)`` serves both kinds, and benchmarks/generate.py compares it with a
hand-written loop and with ``generate``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
import uuid
from typing import Any

import torch

from flowrate._version import __version__
from flowrate.choices import PrefillLogits
from flowrate.config import AUTO
from flowrate.config.generate import MAX_REPEATS, GenerateConfig
from flowrate.errors import ConfigError, OutOfMemory
from flowrate.harness import generate_model as gm
from flowrate.harness.generate_timing import CudaEventClock, RequestTiming, WallClock
from flowrate.harness.profiling import PROFILED_STEPS, ProfileTarget, profile_steps
from flowrate.measure import freed_memory
from flowrate.measure.device import (
    is_out_of_memory,
    on_device,
    resolve_device,
    synchronizer,
    torch_threads,
)
from flowrate.measure.env import collect_environment
from flowrate.measure.peaks import peak_for
from flowrate.measure.stats import summarize
from flowrate.problems.base import Problem
from flowrate.problems.transformer import synthetic_tokens
from flowrate.results.environment import Environment, environment_from
from flowrate.results.profile import Profile
from flowrate.results.schema import IntervalRecord, Result, RunSummary
from flowrate.results.sections import (
    Generation,
    GenerationMemory,
    GenerationRequest,
    Kind,
    LatencyStats,
    ProblemInfo,
)

PREFILL_LAST, PREFILL_ALL = PrefillLogits.LAST, PrefillLogits.ALL
PROFILED_TOKENS = 8  # tokens each profiled generation makes (--profile): a prefill, 7 decode steps


def run_generation(config: GenerateConfig, problem: Problem, argv: list[str] | None = None) -> Result:
    """Build the model, generate warmup + timed rounds, and account for them in a Result."""
    shape = gm.shape_of(problem)
    prompt, new = gm.lengths(shape, config.prompt_len, config.new_tokens)
    dtype = gm.weight_dtype(config.precision)
    device = resolve_device(config.device)
    positions = _logits_positions(config, prompt)
    if config.batch_size != AUTO:
        gm.check_fits(shape, dtype, int(config.batch_size), prompt, new, gm.total_memory(device), positions)
    kept_earlier = freed_memory.apply(config.freed_memory)  # a warning, or None
    with torch_threads(config.threads), on_device(device), torch.inference_mode():
        torch.manual_seed(config.seed)
        model = problem.build_model().to(device=device, dtype=dtype).eval()
        plan = gm.memory_plan(shape, dtype, prompt, prompt + new, gm.free_memory(device), positions)
        batch = _batch_size(config, plan)
        decoder = gm.Decoder(problem, model)
        try:
            timings = _rounds(config, decoder, (batch, prompt, new), device)
            profiled = _profile(config, decoder, (batch, prompt, new), device) if config.profile_dir else None
        except Exception as error:
            if not is_out_of_memory(error):
                raise
            raise OutOfMemory(
                f"batch {batch} x {prompt + new} tokens does not fit on {device}: "
                "use a smaller --batch-size (or auto), shorter lengths or --precision bf16"
            ) from None
        measured_kv = decoder.cache_bytes_per_token()
    environment = environment_from(collect_environment(device, argv))
    section = generation_section(
        shape,
        problem,
        model,
        timings,
        batch,
        prompt,
        new,
        dtype,
        measured_kv,
        plan,
        environment,
        config.prefill_logits,
    )
    memory = dataclasses.replace(section.memory, batch_size_auto=config.batch_size == AUTO)
    section = dataclasses.replace(section, memory=memory)
    result = _result(config, problem, batch, timings, section, environment)
    result = dataclasses.replace(result, profile=profiled)
    return dataclasses.replace(result, warnings=[*result.warnings, kept_earlier]) if kept_earlier else result


def _rounds(
    config: GenerateConfig, decoder: gm.Decoder, lengths: tuple[int, int, int], device: torch.device
) -> list[RequestTiming]:
    """The warmup generations, then the timed ones: at least config.repeats, for config.duration_s."""
    batch, prompt, new = lengths
    generator = torch.Generator(device=device).manual_seed(config.seed)
    clock: Any = CudaEventClock() if device.type == "cuda" else WallClock(synchronizer(device))
    every = config.prefill_logits == PREFILL_ALL
    for _ in range(config.warmup):
        prompts = _prompts(decoder.shape, batch, prompt, device, generator)
        generate_once(decoder, prompts, new, clock, every)
    timings: list[RequestTiming] = []
    started = time.perf_counter()
    while _more(config, len(timings), time.perf_counter() - started):
        generate_once(decoder, _prompts(decoder.shape, batch, prompt, device, generator), new, clock, every)
        timings.append(RequestTiming.from_token_times(clock.seconds()))
    return timings


class _Unclocked:
    """generate_once's clock in a profiled generation: it neither reads the time nor syncs."""

    def start(self) -> None:
        pass

    def mark(self) -> None:
        pass


def _profile(
    config: GenerateConfig, decoder: gm.Decoder, lengths: tuple[int, int, int], device: torch.device
) -> Profile:
    """--profile DIR: a few short generations (PROFILED_TOKENS tokens: a prefill and decode steps)
    profiled after the timed ones, whose figures are already taken (flowrate.harness.profiling)."""
    batch, prompt, new = lengths
    tokens = min(new, PROFILED_TOKENS)
    generator = torch.Generator(device=device).manual_seed(config.seed)
    every = config.prefill_logits == PREFILL_ALL
    prompts = [_prompts(decoder.shape, batch, prompt, device, generator) for _ in range(PROFILED_STEPS)]
    decodes = f"{tokens - 1} decode step{'s' if tokens != 2 else ''}"
    target = ProfileTarget(
        step=lambda p: generate_once(decoder, p, tokens, _Unclocked(), every),
        batches=prompts,
        sync=synchronizer(device),
        device=device,
        precision=config.precision,
        synthetic=True,
        priced="the cost model traces a run's training or inference step, not a generation's "
        "prefill and decode",
        unit=f"generations of {tokens} tokens (a prefill and {decodes} each)",
    )
    assert config.profile_dir is not None
    return profile_steps(target, config.profile_dir)


def generate_once(
    decoder: gm.Decoder, prompts: torch.Tensor, new_tokens: int, clock: Any, all_logits: bool = False
) -> torch.Tensor:
    """Greedy: the prefill gives the first token, each decode step one more; (B, new_tokens) ids.
    The prefill computes the last position's logits only, or with ``all_logits`` every position's."""
    batch, prompt = prompts.shape
    decoder.begin(batch, prompt + new_tokens - 1)  # the last token is never fed back
    out = []
    clock.start()
    token = decoder.step(prompts, last_only=not all_logits)[:, -1].argmax(dim=-1, keepdim=True)
    clock.mark()
    out.append(token)
    for _ in range(new_tokens - 1):
        token = decoder.step(token)[:, -1].argmax(dim=-1, keepdim=True)
        clock.mark()
        out.append(token)
    return torch.cat(out, dim=1)


def _prompts(
    shape: gm.Shape, batch: int, prompt: int, device: torch.device, generator: torch.Generator
) -> torch.Tensor:
    return synthetic_tokens((batch, prompt), shape.vocab_size, device, generator)


def _logits_positions(config: GenerateConfig, prompt: int) -> int:
    """The prompt positions whose logits the prefill computes."""
    return prompt if config.prefill_logits == PREFILL_ALL else 1


def _more(config: GenerateConfig, done: int, elapsed: float) -> bool:
    if done < config.repeats:
        return True
    return config.duration_s is not None and elapsed < config.duration_s and done < MAX_REPEATS


def _batch_size(config: GenerateConfig, plan: dict[str, Any]) -> int:
    if config.batch_size != AUTO:
        return int(config.batch_size)
    fits = plan["max_batch_size"]
    if fits is None:
        raise ConfigError("batch_size", "auto needs the free memory, which cannot be read here")
    if fits < 1:
        raise ConfigError("batch_size", "auto: not even one sequence's KV cache fits in the free memory")
    return min(fits, config.max_batch_size)


def generation_section(
    shape: gm.Shape,
    problem: Problem,
    model: torch.nn.Module,
    timings: list[RequestTiming],
    batch: int,
    prompt: int,
    new: int,
    dtype: torch.dtype,
    measured_kv: float,
    plan: dict[str, Any],
    environment: Environment,
    prefill_logits: str = PREFILL_LAST,
) -> Generation:
    """The generation section: lengths, per-request latencies, rates, memory, FLOPs and bytes,
    for a prefill that computed the logits ``prefill_logits`` names (last or all positions)."""
    kv, weights = shape.kv_bytes_per_token(dtype), gm.weight_bytes(model)
    n, head = gm.matmul_weights(problem, model), gm.head_weights(problem, model)
    positions = prompt if prefill_logits == PREFILL_ALL else 1
    work = gm.Work.of(shape, n, weights, kv, batch, prompt, new, head, positions)
    ttft = sum(t.ttft_s for t in timings)
    decode_s = sum(t.e2e_s - t.ttft_s for t in timings)
    peak = peak_for(str(environment.device_name or environment.device_type or "?"), _precision_key(dtype))
    prefill_fps = work.prefill_flops * len(timings) / ttft if ttft > 0 else None
    bandwidth = work.decode_bytes * len(timings) / decode_s if decode_s > 0 else None
    return Generation(
        batch_size=batch,
        prompt_len=prompt,
        new_tokens=new,
        prefill_logits=prefill_logits,
        requests=[_request(t, batch, prompt) for t in timings],
        # the latencies' distributions over the requests (ITL: over every gap)
        ttft_s=_stats([t.ttft_s for t in timings]),
        tpot_s=_stats([t.tpot_s for t in timings if t.tpot_s is not None]),
        itl_s=_stats([gap for t in timings for gap in t.gaps_s]),
        e2e_s=_stats([t.e2e_s for t in timings]),
        prefill_tokens_per_sec=batch * prompt * len(timings) / ttft if ttft > 0 else None,
        decode_tokens_per_sec=batch * (new - 1) * len(timings) / decode_s if decode_s > 0 else None,
        memory=GenerationMemory(
            kv_bytes_per_token=kv,
            kv_bytes_per_token_measured=measured_kv,
            weight_bytes=weights,
            kv_cache_bytes=batch * (prompt + new - 1) * kv,
            free_bytes=plan["free_bytes"],
            max_batch_size=plan["max_batch_size"],
            max_context_at_batch_1=plan["max_context_at_batch_1"],
        ),
        prefill_flops=work.prefill_flops,
        decode_flops=work.decode_flops,
        decode_bytes=work.decode_bytes,
        prefill_flops_per_sec=prefill_fps,
        prefill_mfu=prefill_fps / peak.flops if prefill_fps and peak.flops else None,
        decode_bytes_per_sec=bandwidth,
        decode_bandwidth_utilization=(
            bandwidth / peak.memory_bandwidth if bandwidth and peak.memory_bandwidth else None
        ),
        peak_reason=peak.reason if peak.flops is None or peak.memory_bandwidth is None else None,
    )


def _request(t: RequestTiming, batch: int, prompt: int) -> GenerationRequest:
    """One request's latencies, every gap between its tokens, and its rates."""
    rates = t.rates(batch, prompt)
    return GenerationRequest(
        ttft_s=t.ttft_s,
        tpot_s=t.tpot_s,
        e2e_s=t.e2e_s,
        itl_s=t.gaps_s,
        prefill_tokens_per_sec=rates["prefill_tokens_per_sec"],
        decode_tokens_per_sec=rates["decode_tokens_per_sec"],
    )


def _precision_key(dtype: torch.dtype) -> str:
    return {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, "fp32")


def _stats(values: list[float]) -> LatencyStats | None:
    if not values:
        return None
    ordered = sorted(values)
    s = summarize(values)
    return LatencyStats(
        mean=s.mean,
        median=s.median,
        p90=ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        p99=ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
        min=s.min,
        max=s.max,
        n=s.n,
    )


def _result(
    config: GenerateConfig,
    problem: Problem,
    batch: int,
    timings: list[RequestTiming],
    section: Generation,
    environment: Environment,
) -> Result:
    """A Result like a run's: each generation is one interval of B samples (sequences), so the
    store, `runs` and `compare` read sequences/s; the generation section holds the rest."""
    intervals = _intervals(timings, batch)
    stats = summarize([i.samples_per_sec for i in intervals])
    elapsed = intervals[-1].elapsed_s
    samples_per_sec = batch * len(timings) / elapsed
    flops = ((section.prefill_flops or 0) + (section.decode_flops or 0)) * len(timings) / elapsed
    summary = RunSummary(
        samples_per_sec=samples_per_sec,
        rate_samples_per_sec=intervals[-1].samples_per_sec,
        steps_per_sec=len(timings) / elapsed,
        tokens_per_sec=samples_per_sec * (section.new_tokens or 0),  # output tokens/s, end to end
        model_flops_per_sec=flops,
        **stats.rate_fields(),
        timed_steps=len(timings),
        timed_samples=batch * len(timings),
        timed_duration_s=elapsed,
        intervals=len(intervals),
        sample_every_steps=1,
        preheat_steps=config.warmup,
        preheat_s=0.0,
        final_loss=None,
    )
    return Result(
        config=config.replace(size=getattr(problem, "size", config.size)).recorded(),
        problem=ProblemInfo(
            name=problem.name,
            size=getattr(problem, "size", None),
            parameters=problem.parameter_count(),
            settings=problem.describe(),
        ),
        batch_size=batch,
        environment=environment,
        intervals=intervals,
        losses=[],
        summary=summary,
        generation=section,
        kind=Kind.GENERATE,
        run_id=uuid.uuid4().hex[:12],
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        flowrate_version=__version__,
    )


def _intervals(timings: list[RequestTiming], batch: int) -> list[IntervalRecord]:
    out: list[IntervalRecord] = []
    elapsed = 0.0
    for index, t in enumerate(timings):
        elapsed += t.e2e_s
        rate = batch / t.e2e_s
        out.append(
            IntervalRecord(
                index=index,
                kind="compute",
                first_step=index,
                steps=1,
                samples=batch,
                seconds=t.e2e_s,
                samples_per_sec=rate,
                rate_samples_per_sec=rate,
                global_samples_per_sec=batch * (index + 1) / elapsed,
                elapsed_s=elapsed,
            )
        )
    return out
