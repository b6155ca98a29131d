"""`flowrate run` as text: the status lines and the run summary as rows. Results in, lines out; no
printing, so tests assert exact text."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowrate.choices import Mode
from flowrate.cli.profile_text import cost_rows, profile_rows, solution_rows
from flowrate.measure import freed_memory
from flowrate.measure.census import census_line, launch_ceiling
from flowrate.results.configs import freed_memory_asked
from flowrate.results.environment import MachineLoadInfo
from flowrate.units import count, counted, gib, rate, short_duration, si

if TYPE_CHECKING:
    from flowrate.config import RunConfig
    from flowrate.problems.base import Problem
    from flowrate.results.schema import Result
    from flowrate.results.sections import (
        Distributed,
        Energy,
        Estimate,
        Flops,
        Input,
        Memory,
        Operators,
        Repeat,
        Streaming,
    )


def span(config: RunConfig) -> str:
    """How long the plan measures, in words."""
    return (
        f"{config.steps} steps" if config.steps else f"{config.min_steps} steps and {config.duration_s:g} s"
    )


def problem_words(problem: Problem) -> str:
    """'transformer/debug (1.234 M parameters)'."""
    return f"{problem.name}/{problem.size} ({count(problem.parameter_count())} parameters)"


def start_line(config: RunConfig, problem: Problem) -> str:
    """What is about to be measured, and for how long."""
    return (
        f"flowrate: {problem_words(problem)} "
        f"{config.mode} {config.precision.value}: {config.preheat_steps} preheat steps, "
        f"then timing at least {span(config)}"
    )


def start_lines(config: RunConfig, problem: Problem, world_size: int | None) -> list[str]:
    """What `flowrate run` says before it runs; ``world_size``: the torchrun launch's, if any."""
    said = [data_parallel_line(world_size)] if world_size is not None else []
    return [*said, start_line(config, problem)]


def data_parallel_line(world_size: int) -> str:
    return f"data-parallel: {world_size} ranks; live figures are rank 0's, the result sums them all"


def repeating_line(repeat: int) -> str:
    return f"{repeat} runs, each in a fresh process"


def repeat_line(index: int, repeat: int, result: Result) -> str:
    """One fresh process of --repeat done: its median and GlobalRate."""
    s = result.summary
    return (
        f"run {index + 1}/{repeat}: median {rate(s.median_samples_per_sec)} samples/s, "
        f"GlobalRate {rate(s.samples_per_sec)}"
    )


def summary_rows(result: Result) -> list[tuple[str, str]]:
    """The human summary of one run, as (label, value) rows."""
    return [
        *_headline_rows(result),
        *_timing_rows(result),
        *_hardware_rows(result),
        *_checkpoint_rows(result),
        *_extra_rows(result),
    ]


def _headline_rows(result: Result) -> list[tuple[str, str]]:
    """What ran where, and its throughput."""
    s = result.summary
    c = result.config
    p = result.problem
    device = result.environment.device_name or c.device
    optimizer = c.optimizer if c.mode == Mode.TRAIN else ""
    rows = [
        (
            "problem",
            f"{p.name}/{p.size}  ({count(p.parameters)} parameters, {_blocks(p.blocks)})",
        ),
        ("run", f"{c.mode}  {c.precision}  batch {result.batch_size}  {optimizer}".rstrip()),
        ("device", str(device)),
        (
            "throughput",
            f"{rate(s.samples_per_sec)} samples/s (GlobalRate)  {rate(s.steps_per_sec)} steps/s",
        ),
    ]
    if result.distributed is not None:
        rows.append(("ranks", _distributed_line(result.distributed)))
    if s.tokens_per_sec is not None:
        rows.append(("tokens", f"{si(s.tokens_per_sec, digits=4)} tokens/s"))
    return rows


def _timing_rows(result: Result) -> list[tuple[str, str]]:
    """Rate, the intervals and their spread, and what was timed."""
    s = result.summary
    return [
        ("Rate", f"{rate(s.rate_samples_per_sec)} samples/s (smoothed, last sample point)"),
        ("intervals", _interval_line(result)),
        ("spread", _spread_line(result)),
        (
            "timed",
            f"{s.timed_steps} steps, {s.timed_samples} samples in {s.timed_duration_s:.2f} s "
            f"(sample point every {s.sample_every_steps} steps)",
        ),
        ("preheat", f"{s.preheat_steps} steps in {s.preheat_s:.2f} s (not timed)"),
    ]


def _checkpoint_rows(result: Result) -> list[tuple[str, str]]:
    s = result.summary
    if not s.checkpoints:
        return []
    return [
        (
            "checkpoints",
            f"{s.checkpoints} in {s.checkpoint_s:.2f} s ({s.checkpoint_overhead:.1%} overhead); "
            f"compute throughput {rate(s.compute_samples_per_sec)} samples/s without them",
        )
    ]


def _extra_rows(result: Result) -> list[tuple[str, str]]:
    """The rows only some runs have: loss, streaming, estimate, compile, input, repeats, search."""
    s = result.summary
    rows: list[tuple[str, str]] = []
    if s.final_loss is not None and result.config.mode == Mode.TRAIN:  # inference: no training loss
        rows.append(("final loss", f"{s.final_loss:.4f}"))
    if result.streaming is not None:
        rows += _streaming_rows(result.streaming)
    if result.estimate is not None:
        rows.append(("estimate", _estimate_line(result.estimate, s.samples_per_sec)))
    if result.compile:
        c = result.compile
        hit = "cache hit" if c.cache_hit else "compiled (cache miss)"
        rows.append(("compile", f"first step {c.compile_s or 0:.2f} s, {hit}"))
    if result.input is not None:
        rows.append(("input", _input_line(result.input)))
    if result.repeat:
        rows.append(("repeats", _repeat_line(result.repeat)))
    if result.problem.name == "launch" and s.median_samples_per_sec > 0:
        rows += _launch_rows(result)
    if result.batch_size_search:
        tried = ", ".join(f"{a.batch_size} {'fits' if a.fits else 'OOM'}" for a in result.batch_size_search)
        rows.append(("batch search", tried))
    if result.cost is not None:
        rows += cost_rows(result.cost)
    if result.solution is not None:
        rows += solution_rows(result.solution)
    if result.profile is not None:
        rows += profile_rows(result.profile)
    return rows


# Ranks listed one by one in the summary; beyond this the median and the slowest stand for them.
_RANKS_LISTED = 8


def _distributed_line(d: Distributed) -> str:
    """Data-parallel: how many ranks where, the batch per rank, and each rank's share of the sum."""
    ranks = d.ranks
    hosts = f"{d.hosts} host" + ("s" if d.hosts != 1 else "")
    rates = [rate(r.samples_per_sec) for r in ranks[:_RANKS_LISTED]]
    listed = ", ".join(rates) + (", …" if len(ranks) > _RANKS_LISTED else "")
    if len(ranks) > _RANKS_LISTED:
        listed += f" (median {rate(d.median_rank_samples_per_sec)}, slowest rank {d.slowest_rank})"
    return (
        f"{d.world_size} on {hosts} ({d.backend}): batch {d.batch_size_per_rank} per rank, "
        f"{d.global_batch_size} in all; throughput is the sum of the ranks' {listed} samples/s"
    )


def _streaming_rows(st: Streaming) -> list[tuple[str, str]]:
    """Where a streamed step's time went, and what it held where."""
    hidden = st.copy_hidden_fraction
    rows = [
        (
            "streaming",
            f"{st.blocks} blocks in {st.compute_dtype}"
            + (", recomputed in backward" if st.recompute else "")
            + (f", gradients clipped to {st.clip_grad_norm:g}" if st.clip_grad_norm else ""),
        ),
        (
            "per step",
            f"copy in {_ms(st.copy_in_s_per_step)}, out {_ms(st.copy_out_s_per_step)}; "
            f"{'—' if hidden is None else f'{hidden:.0%}'} of copy-in hidden behind compute; "
            f"waited {_ms(st.optimizer_wait_s_per_step)} for the host optimizer",
        ),
        (
            "held",
            f"device weights at most {gib(st.device_weight_bytes_peak)} (largest block "
            f"{gib(st.largest_block_bytes)}); host {gib(st.host_bytes)}"
            + (" pinned" if st.host_pinned else " pageable"),
        ),
    ]
    if st.note:
        rows.append(("", st.note))
    return rows


def _estimate_line(estimate: Estimate, measured: float) -> str:
    """The cost model's prediction beside the measurement, or why there is none."""
    predicted = estimate.samples_per_sec
    if predicted is None:
        return f"— ({estimate.reason})"
    return f"{rate(predicted)} samples/s predicted by the cost model ({predicted / measured:.2f}× measured)"


def _ms(duration_s: float | None) -> str:
    return "—" if duration_s is None else f"{duration_s * 1000:.3g} ms"


def _input_line(i: Input) -> str:
    """--data: the input-bound share, and the dataset and loader behind it."""
    loader = f"{i.workers} workers, prefetch {i.prefetch}" if i.workers else "read in the step's thread"
    level = "" if i.input_bound == "no" else f", {i.input_bound} input-bound"
    return (
        f"{i.input_bound_share or 0.0:.1%} of step time waiting for data{level} ({i.samples} samples in "
        f"{i.shards} shards, {loader}{', pinned' if i.pinned else ''})"
    )


def collective_line(operation: str, summed_bytes_per_sec: float, distributed: Distributed) -> str:
    """nccl-tests' algbw and busbw of a collective kernel (flowrate.problems.kernels.collectives)."""
    from flowrate.problems.kernels.collectives import collective_bandwidths

    ranks = distributed.world_size
    algbw, busbw = collective_bandwidths(operation, summed_bytes_per_sec, ranks)
    return f"algbw {si(algbw, 'B/s')}  busbw {si(busbw, 'B/s')}  ({ranks} ranks, {distributed.backend})"


def _hardware_rows(result: Result) -> list[tuple[str, str]]:
    """FLOP/s and MFU, bandwidth, energy and memory: each with its reason when empty."""
    e, m = result.energy, result.memory
    rows = [*_flops_rows(result), *_bandwidth_rows(result)]
    if e.seconds is not None or e.reason is not None:  # a record before version 2 has no reading
        rows.append(("energy", _energy_line(e)))
    if m.rss_scope is not None:
        rows.append(("memory", _memory_line(m)))
    said = result.environment.freed_memory
    if line := freed_memory.label(freed_memory_asked(result.config), said, result.environment.device_type):
        rows.append(("host memory", line))
    if (load := result.environment.machine_load) is not None:
        rows.append(("machine", _load_line(load)))
    return rows


def _flops_rows(result: Result) -> list[tuple[str, str]]:
    """Model and hardware FLOP/s, MFU, and what the operator count saw of a step."""
    f = result.flops
    rows: list[tuple[str, str]] = []
    if f.model_flops_per_sample:
        executed = f.executed_flops_per_sample
        hardware = f.hardware_flops_per_sec
        rows.append(
            (
                "FLOP/s",
                f"model {si(f.model_flops_per_sec, 'FLOP/s')} ({si(f.model_flops_per_sample, 'FLOP')}"
                f"/sample)  hardware {si(hardware, 'FLOP/s') if hardware else '—'}"
                + (f" ({si(executed, 'FLOP')}/sample counted)" if executed else ""),
            )
        )
        rows.append(("MFU", _mfu_line(f)))
        if f.mixed_mfu is not None or f.mixed_mfu_reason is not None:
            rows.append(("mixed MFU", _mixed_mfu_line(f)))
    if result.operators is not None:
        rows.append(("FLOP count", coverage_line(result.operators)))
        if result.operators.census is not None:
            rows.append(("precision", census_line(result.operators.census, result.environment.device_type)))
            calls = result.operators.census.op_calls
            ceiling = f"`flowrate run -p launch -O ops={calls}` gives their steps/s ceiling"
            rows.append(("launches", f"{calls} ops dispatched per step; {ceiling}"))
    return rows


def _bandwidth_rows(result: Result) -> list[tuple[str, str]]:
    """Bytes per second against the datasheet's, and a collective's algorithm and bus bandwidth."""
    f = result.flops
    if not f.bytes_per_sec:
        return []
    fraction = f.bandwidth_fraction
    peak = f.peak_bandwidth
    of_peak = f"  {fraction:.1%} of {si(peak, 'B/s')} datasheet" if fraction and peak else ""
    rows = [("bandwidth", f"{si(f.bytes_per_sec, 'B/s')}{of_peak}")]
    if (operation := result.problem.settings.get("operation")) and result.distributed:
        rows.append(("collective", collective_line(operation, f.bytes_per_sec, result.distributed)))
    return rows


def _load_line(load: MachineLoadInfo) -> str:
    """What else the machine did over the timed window (flowrate.measure.machine_load)."""
    start, end = load.loadavg_1m_start, load.loadavg_1m_end
    average = f", load average {start:.2f} → {end:.2f}" if start is not None and end is not None else ""
    return (
        f"other processes {load.others_cpus or 0:.2f} of {load.cpus} CPUs, "
        f"steal {load.steal_share or 0:.1%}{average}"
    )


def coverage_line(operators: Operators) -> str:
    """The counter's coverage: "FLOPs counted over 14 ops; not counted: aten.foo ×12"."""
    missing = operators.not_counted
    absent = ", ".join(f"{op} ×{calls}" for op, calls in sorted(missing.items())) or "none"
    return f"FLOPs counted over {len(operators.counted_ops)} ops; not counted: {absent}"


def _mfu_line(f: Flops) -> str:
    parts = []
    if f.mfu is not None:
        line = f"{f.mfu:.1%} of {si(f.peak_flops, 'FLOP/s')} dense datasheet peak"
        if f.hfu is not None:
            line += f"  (HFU {f.hfu:.1%})"
        parts.append(line)
    else:
        parts.append(f"datasheet — ({f.reason})")
    if f.mfu_of_measured_peak is not None:
        measured = si(f.measured_peak_flops, "FLOP/s")
        source = f.measured_peak_source or "--measure-peak GEMM"
        parts.append(f"{f.mfu_of_measured_peak:.1%} of {measured} measured max ({source})")
    elif f.mfu is None:
        parts.append("--measure-peak gives MFU against a measured GEMM")
    return "; ".join(parts)


def _launch_rows(result: Result) -> list[tuple[str, str]]:
    """The launch kernel: time per call (a sample is a call) and, with -O ops=N, the ceiling."""
    s = result.summary
    per_call = 1 / s.median_samples_per_sec
    low, high, ends = s.min_samples_per_sec, s.max_samples_per_sec, "min–max"
    if s.p5_samples_per_sec is not None and s.p95_samples_per_sec is not None:
        low, high, ends = s.p5_samples_per_sec, s.p95_samples_per_sec, "p5–p95"
    rows = [
        (
            "per call",
            f"{short_duration(per_call)} (median interval; {short_duration(1 / high)}–"
            f"{short_duration(1 / low)} over the intervals' {ends}, CV {_percent(s.cv)})",
        )
    ]
    ops = result.problem.settings.get("ops")
    ceiling = launch_ceiling(ops or 0, per_call)
    if ceiling is not None:
        rows.append(("ceiling", f"{ops} ops per step: launches alone cap a step at {rate(ceiling)} steps/s"))
    return rows


def _mixed_mfu_line(f: Flops) -> str:
    """MFU against the time-weighted peak of the formats that carried the FLOPs."""
    if f.mixed_mfu is None:
        return f"— ({f.mixed_mfu_reason})"
    peak = si(f.mixed_peak_flops, "FLOP/s")
    return f"{f.mixed_mfu:.1%} of {peak} mixed peak (each format's FLOPs at its own peak)"


def _energy_line(e: Energy) -> str:
    if e.joules is None:
        return f"— ({e.reason})"
    line = (
        f"{si(e.joules, 'J')} over {e.seconds:.2f} s, {si(e.average_watts or 0, 'W')} average, "
        f"{rate(e.samples_per_joule)} samples/J"
    )
    if e.flops_per_joule:
        line += f", {si(e.flops_per_joule, 'FLOP/J')}"
    return f"{line}  [{e.method}: {', '.join(e.domains)}]"


def _memory_line(m: Memory) -> str:
    parts = []
    if m.device_peak_allocated_bytes is not None:
        parts.append(
            f"device peak {gib(m.device_peak_allocated_bytes)} allocated, "
            f"{gib(m.device_peak_reserved_bytes)} reserved"
        )
    if m.process_peak_rss_bytes is not None:
        scope = "" if m.rss_scope == "run" else " (since the process started)"
        parts.append(f"process peak RSS {gib(m.process_peak_rss_bytes)}{scope}")
    return "; ".join(parts) or "—"


def _repeat_line(r: Repeat) -> str:
    line = f"{r.n} fresh processes: median of run medians {rate(r.median_samples_per_sec)} samples/s"
    if r.ci95_low_samples_per_sec is not None and r.ci95_high_samples_per_sec is not None:
        half = (r.ci95_high_samples_per_sec - r.ci95_low_samples_per_sec) / 2
        line += f", mean {rate(r.mean_samples_per_sec)} ± {rate(half)} (95% CI)"
    return line + f", across-run CV {_percent(r.cv)}" + (" (runs disagree)" if r.disagree else "")


def _blocks(count: int | None) -> str:
    return "no blocks declared" if count is None else counted(count, "block")


def _interval_line(result: Result) -> str:
    s = result.summary
    if s.ci95_low_samples_per_sec is None or s.ci95_high_samples_per_sec is None:
        return f"median {rate(s.median_samples_per_sec)} samples/s over {s.intervals} interval(s)"
    half = (s.ci95_high_samples_per_sec - s.ci95_low_samples_per_sec) / 2
    return (
        f"median {rate(s.median_samples_per_sec)}, mean {rate(s.mean_samples_per_sec)} ± {rate(half)} "
        f"(95% CI) samples/s over {s.intervals} intervals"
    )


def _percent(share: float | None) -> str:
    return "unknown" if share is None else f"{share:.1%}"


def _spread_line(result: Result) -> str:
    s = result.summary
    if s.p5_samples_per_sec is not None and s.p95_samples_per_sec is not None:
        ends = f"p5 {rate(s.p5_samples_per_sec)}  p95 {rate(s.p95_samples_per_sec)}"
    else:
        ends = f"min {rate(s.min_samples_per_sec)}  max {rate(s.max_samples_per_sec)}"
    if s.stdev_samples_per_sec is None or s.cv is None:
        return f"stdev and CV unknown (one interval)  {ends}"
    return f"stdev {rate(s.stdev_samples_per_sec)}  CV {s.cv:.1%}  {ends}"
