"""`flowrate generate`'s flags to a GenerateConfig and Problem, and its result as rows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flowrate.errors import ConfigError
from flowrate.measure import freed_memory
from flowrate.results.configs import freed_memory_asked
from flowrate.units import gib, rate, si

if TYPE_CHECKING:
    from flowrate.config import GenerateConfig
    from flowrate.problems.base import Problem
    from flowrate.results.schema import Result
    from flowrate.results.sections import Generation, LatencyStats


def resolve(flags: dict[str, Any]) -> tuple[GenerateConfig, Problem]:
    """Refuses what cannot generate before any model is built: a training mode, a model that is not
    a causal LM, lengths over the model's context. A mistake names the flag as typed (`-O nosuch`)."""
    from flowrate.cli.resolve import (
        check_max_batch_size,
        flag_of,
        parse_config_overrides,
        parse_problem_options,
        typed_names,
    )
    from flowrate.config import GenerateConfig, settings
    from flowrate.harness.generate_model import lengths, shape_of
    from flowrate.problems.registry import get_problem

    if flags.pop("mode") == "train":
        raise ConfigError("--mode", "generate runs inference only: drop --mode train")
    check_max_batch_size(flags)
    preset = flags.pop("preset")
    if preset is not None:  # a library model's preset is its size, as for `run`
        if flags["size"] is not None:
            raise ConfigError("--preset", "names the size of an hf: model; give it or --size, not both")
        flags["size"] = preset
    typed = {f.name: f.flag for f in settings(GenerateConfig)} | typed_names(flags, None)
    try:
        options: dict[str, int | str] = dict(parse_problem_options(flags.pop("extra_options")))
        options.update(parse_config_overrides(flags.pop("hf_config")))
        given = {k: v for k, v in flags.items() if v is not None}  # a flag left out: the default
        config = GenerateConfig(problem_options=options, **given)
        problem = get_problem(config.problem, config.size, config.problem_options)
        lengths(shape_of(problem), config.prompt_len, config.new_tokens)
    except ConfigError as mistake:
        raise ConfigError(flag_of(mistake.field, typed), mistake.message) from None
    return config, problem


def start_line(config: GenerateConfig, problem: Problem) -> str:
    size = getattr(problem, "size", None)
    return (
        f"generating with {problem.name}{'/' + size if size else ''}: batch {config.batch_size}, "
        f"{config.precision} on {config.device}"
    )


def _ms(stats: LatencyStats | None) -> str:
    if stats is None or stats.mean is None or stats.median is None or stats.p99 is None:
        return "-"
    mean, median, p99 = (value * 1e3 for value in (stats.mean, stats.median, stats.p99))
    return f"mean {mean:.4g} ms  median {median:.4g} ms  p99 {p99:.4g} ms"


def _fraction(value: float | None, achieved: float | None, unit: str) -> str:
    share = f"{value:.1%}" if value is not None else "-"
    return f"{share}  ({si(achieved, unit) if achieved is not None else '-'})"


def generation_rows(result: Result) -> list[tuple[str, str]]:
    """The human summary of one generation run."""
    from flowrate.results.sections import Generation

    g = result.generation or Generation()
    p, c = result.problem, result.config
    device = result.environment.device_name or c.device
    rows = [
        ("problem", f"{p.name}/{p.size}"),
        (
            "generate",
            f"batch {g.batch_size}  prompt {g.prompt_len}  new tokens {g.new_tokens}  "
            f"{c.precision}  {len(g.requests)} requests",
        ),
        ("device", str(device)),
        ("TTFT", _ms(g.ttft_s)),
        ("TPOT", _ms(g.tpot_s)),
        ("ITL", _ms(g.itl_s)),
        ("E2E", _ms(g.e2e_s)),
        ("prefill", f"{rate(g.prefill_tokens_per_sec)} tokens/s"),
        ("decode", f"{rate(g.decode_tokens_per_sec)} tokens/s"),
        *_memory_rows(g),
        ("prefill MFU", _fraction(g.prefill_mfu, g.prefill_flops_per_sec, "FLOP/s")),
        ("decode bandwidth", _fraction(g.decode_bandwidth_utilization, g.decode_bytes_per_sec, "B/s")),
    ]
    if g.peak_reason:
        rows.append(("peaks", g.peak_reason))
    said = result.environment.freed_memory
    if line := freed_memory.label(freed_memory_asked(c), said, result.environment.device_type):
        rows.append(("host memory", line))
    if result.profile is not None:  # --profile DIR
        from flowrate.cli.profile_text import profile_rows

        rows += profile_rows(result.profile)
    return rows


def _memory_rows(g: Generation) -> list[tuple[str, str]]:
    """The KV cache per token (computed and measured) and at this batch, and what fits."""
    mem = g.memory
    kv, measured = gib(mem.kv_bytes_per_token), gib(mem.kv_bytes_per_token_measured)
    rows = [("KV cache", f"{kv}/token (measured {measured}), {gib(mem.kv_cache_bytes)} at this batch")]
    if mem.max_batch_size is not None:
        auto = " (auto)" if mem.batch_size_auto else ""
        at_one = f"context {mem.max_context_at_batch_1} at batch 1"
        rows.append(("fits", f"batch {mem.max_batch_size} at this context{auto}, {at_one}"))
    return rows
