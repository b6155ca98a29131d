"""The typed sections of a result record, and the record's kind.

Each section is a frozen dataclass whose fields are the section's JSON keys (units in the names,
as everywhere in a record). A section a record predates reads with every field None (a version 1
record has no FLOP count, so its ``flops.mfu`` is None, as it was when the section was missing);
flowrate.results.migrate brings each earlier layout to these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Kind(StrEnum):
    """What a record measured; each kind has its own configuration identity
    (flowrate.results.identity)."""

    RUN = "run"  # `flowrate run`, a session, a sweep's or explore's run
    CHECK = "check"  # `flowrate check`: a learnable task's loss curve (fidelity section)
    GENERATE = "generate"  # `flowrate generate`: greedy generation with a KV cache (generation)
    SERVE = "serve"  # `flowrate serve-bench`: a load test of an inference server (serving)
    SURVEY = "survey"  # `flowrate survey`: a report card of the machine (survey)


@dataclass(frozen=True)
class ProblemInfo:
    """What ran: the problem's name and size and, for a model the harness built, its declared and
    built parameters and its analytic FLOPs per sample; ``settings`` is the problem's own account
    of its shape (layers, hidden, sequence length, …)."""

    name: str | None = None
    size: str | None = None
    spec: str | None = None  # the --problem the user gave (a zoo name or PATH.py:FACTORY)
    parameters: int | None = None  # as the problem declares them
    parameters_built: int | None = None  # counted in the model the harness built
    forward_flops_per_sample: int | None = None
    train_flops_per_sample: int | None = None  # None: the problem does not train
    model_flops_per_sample: int | None = None  # of the mode that ran
    tokens_per_sample: int | None = None  # token problems only
    blocks: int | None = None  # None: the problem declares no blocks
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Flops:
    """Model and executed FLOPs, FLOP/s, MFU and HFU against the datasheet peak (and against a
    measured GEMM peak where one ran), bandwidth of memory-bound kernels, and MFU against the peak
    of each FLOP's own format (the mixed fields; flowrate.measure.census)."""

    model_flops_per_sample: int | None = None
    executed_flops_per_sample: float | None = None  # None: not counted
    model_flops_per_sec: float | None = None
    hardware_flops_per_sec: float | None = None
    peak_flops: float | None = None  # dense datasheet peak for the device and precision
    peak_source: str | None = None
    mfu: float | None = None
    hfu: float | None = None
    reason: str | None = None  # why mfu is empty
    measured_peak_flops: float | None = None
    mfu_of_measured_peak: float | None = None
    # what measured measured_peak_flops: None for --measure-peak's GEMM, "survey ID" for the
    # matmul maximum of a stored survey of this machine (flowrate.harness.measured_max)
    measured_peak_source: str | None = None
    bytes_per_sample: int | None = None
    bytes_per_sec: float | None = None
    peak_bandwidth: float | None = None
    bandwidth_fraction: float | None = None
    mixed_peak_flops: float | None = None
    mixed_mfu: float | None = None
    mixed_mfu_reason: str | None = None


@dataclass(frozen=True)
class Energy:
    """The energy over the timed window, what measured it and what it covers; samples and model
    FLOPs per joule. ``joules`` None with the reason."""

    joules: float | None = None
    seconds: float | None = None  # the metered window, on the meter's clock
    average_watts: float | None = None
    method: str | None = None
    domains: list[str] = field(default_factory=list)
    per_domain_joules: dict[str, float] = field(default_factory=dict)
    reason: str | None = None
    caveats: list[str] = field(default_factory=list)
    samples_per_joule: float | None = None
    flops_per_joule: float | None = None
    ranks_metered: list[int] | None = None  # data-parallel: the ranks whose meters were summed


@dataclass(frozen=True)
class Memory:
    """Peak device memory allocated and reserved, and the process's peak RSS."""

    device_peak_allocated_bytes: int | None = None  # None on the CPU: PyTorch does not track it
    device_peak_reserved_bytes: int | None = None
    process_peak_rss_bytes: int | None = None
    rss_scope: str | None = None  # "run": since the timed loop began; "process": since it started
    reason: str | None = None  # why a device figure is empty


@dataclass(frozen=True)
class RepeatRun:
    """One process's run of a --repeat: its own figures."""

    run_id: str = ""
    process_id: int | None = None
    median_samples_per_sec: float | None = None
    samples_per_sec: float | None = None
    cv: float | None = None
    intervals: int | None = None
    timed_duration_s: float | None = None
    mfu: float | None = None
    final_loss: float | None = None


@dataclass(frozen=True)
class Repeat:
    """--repeat N: each process's run, and the statistics across the per-run medians (the record's
    own figures are the run with the median median's)."""

    runs: list[RepeatRun] = field(default_factory=list)
    n: int = 0
    representative_run_id: str = ""
    median_samples_per_sec: float | None = None
    mean_samples_per_sec: float | None = None
    stdev_samples_per_sec: float | None = None  # None for one run: its spread is unknown
    cv: float | None = None
    ci95_low_samples_per_sec: float | None = None
    ci95_high_samples_per_sec: float | None = None
    range_fraction: float | None = None  # (max - min) / median of the per-run medians
    disagree: bool = False


@dataclass(frozen=True)
class Fidelity:
    """`flowrate check`: the loss curve of a learnable task, whether it fell beyond its noise,
    and the steps it took to reach a target; for an inference format, the fp32-trained model's
    held-out loss in the format beside fp32's."""

    task: str | None = None
    steps: int = 0
    window: int = 0
    initial_loss: float | None = None
    final_loss: float | None = None  # the loss reached (the format's held-out loss for a format)
    min_loss: float | None = None
    target_loss: float | None = None
    steps_to_target: int | None = None
    relative_drop: float | None = None
    drop_standard_error: float | None = None
    fell: bool = False
    preheat_steps: int | None = None
    # inference formats only (trained in fp32, evaluated in the format)
    trained_in: str | None = None
    trained_final_loss: float | None = None
    eval_steps: int | None = None
    reference_loss: float | None = None
    loss_increase: float | None = None


@dataclass(frozen=True)
class Compile:
    """--compile: the first (compiling) step's seconds and inductor's on-disk cache use."""

    compile_s: float | None = None
    cache_hits: int = 0
    cache_misses: int = 0
    directory: str = ""
    cache_hit: bool = False


@dataclass(frozen=True)
class BatchSizeTry:
    """One try of --batch-size auto: the batch size and whether a step of it fit in memory."""

    batch_size: int
    fits: bool


@dataclass(frozen=True)
class Streaming:
    """--execution streaming: where a step's time went (medians over the timed steps) and the
    memory the streamed blocks held."""

    blocks: int | None = None
    resident_blocks: list[int] = field(default_factory=list)  # blocks kept on the device
    recompute: bool | None = None
    clip_grad_norm: float | None = None
    compute_dtype: str | None = None
    copy_in_s_per_step: float | None = None
    copy_out_s_per_step: float | None = None
    copy_exposed_s_per_step: float | None = None  # the copy time the step waited for
    copy_hidden_fraction: float | None = None  # None: nothing was copied
    optimizer_wait_s_per_step: float | None = None
    optimizer_s_total: float | None = None  # None: no host optimizer (inference)
    steps: int | None = None
    device_weight_bytes_peak: int | None = None
    largest_block_bytes: int | None = None
    host_bytes: int | None = None
    host_pinned: bool | None = None
    note: str | None = None


@dataclass(frozen=True)
class InputField:
    """One field of the dataset's samples (flowrate.problems.sample.SampleField)."""

    name: str | None = None
    shape: list[int] = field(default_factory=list)
    dtype: str | None = None
    high: int | None = None  # integer fields: every value lies in [0, high)


@dataclass(frozen=True)
class Input:
    """--data (or a session's own loader): the dataset and the loader's settings, and the share of
    the step time spent waiting for batches (the input-bound share)."""

    dataset: str | None = None  # a session's: "the loop's loader"
    samples: int | None = None
    shards: int | None = None
    fields: list[InputField] = field(default_factory=list)
    origin: str | None = None  # what made the dataset (synthetic, tokens, images)
    workers: int | None = None
    prefetch: int | None = None  # None without workers
    pinned: bool | None = None
    shuffle_buffer: int | None = None
    rank: int | None = None  # None once the ranks are merged
    world_size: int | None = None
    sharding: str | None = None  # a session's data-parallel loader: how its batches were sharded
    input_wait_s: float | None = None
    input_bound_share: float | None = None
    input_bound: str | None = None  # "no", "moderately" or "highly"


@dataclass(frozen=True)
class Estimate:
    """The cost model's estimate for this configuration on this device, recorded beside the
    measurement; ``samples_per_sec`` None with the reason."""

    cost_model: str | None = None
    device: str | None = None
    samples_per_sec: float | None = None
    tokens_per_sec: float | None = None
    step_s: float | None = None
    basis: str | None = None
    execution: str | None = None
    hidden_share: float | None = None  # streaming: the copy time hidden behind compute
    reason: str | None = None  # why samples_per_sec is empty
    note: str | None = None  # what the estimate leaves out


@dataclass(frozen=True)
class RankFigures:
    """One rank of a data-parallel run: where it ran and its own figures."""

    rank: int = 0
    local_rank: int | None = None
    hostname: str | None = None
    device: str | None = None
    device_name: str | None = None
    samples_per_sec: float | None = None
    median_samples_per_sec: float | None = None
    rate_samples_per_sec: float | None = None
    timed_samples: int | None = None
    timed_duration_s: float | None = None
    final_loss: float | None = None
    process_peak_rss_bytes: int | None = None
    device_peak_allocated_bytes: int | None = None
    input_bound_share: float | None = None
    warnings: int = 0  # how many warnings the rank's own record had


@dataclass(frozen=True)
class Distributed:
    """A data-parallel run (torchrun): its world, the summed throughput and each rank's figures."""

    world_size: int = 1
    backend: str | None = None
    hosts: int | None = None
    timeout_s: float | None = None
    batch_size_per_rank: int | None = None
    global_batch_size: int | None = None
    samples_per_sec: float | None = None  # the sum over ranks
    median_rank_samples_per_sec: float | None = None
    slowest_rank: int | None = None
    rank_spread: float | None = None  # (fastest - slowest) / median of the ranks' throughput
    gradient_reduction: str | None = None  # None: inference, nothing reduced
    ranks: list[RankFigures] = field(default_factory=list)


@dataclass(frozen=True)
class OpRow:
    """One op of the counted step: its input dtypes, the format it ran in and its totals."""

    op: str = ""
    dtypes: list[str] = field(default_factory=list)
    format: str | None = None  # None: no floating-point input
    accumulate: str | None = None
    flops: int = 0
    bytes: int = 0
    calls: int = 0


@dataclass(frozen=True)
class FormatFigures:
    """One format's share of the counted step (flowrate.measure.census)."""

    flops: int = 0
    bytes: int = 0
    calls: int = 0
    flop_share: float = 0.0


@dataclass(frozen=True)
class Census:
    """The formats the counted step's FLOPs ran in, and the effective precision (the lowest format
    carrying any)."""

    requested: str | None = None
    effective: str | None = None
    tf32: bool = False
    op_calls: int | None = None
    formats: dict[str, FormatFigures] = field(default_factory=dict)  # "none": no floating input


@dataclass(frozen=True)
class Operators:
    """The executed FLOPs of one counted step, op by op, and its coverage."""

    batch_size: int | None = None
    flops: int | None = None
    bytes: int | None = None
    recomputed_flops: int | None = None
    attention_full_flops: int | None = None
    attention_kept_flops: int | None = None
    counted_ops: list[str] = field(default_factory=list)  # ops that carried FLOPs
    not_counted: dict[str, int] = field(default_factory=dict)  # ops with no FLOP formula: calls
    ops: list[OpRow] = field(default_factory=list)
    census: Census | None = None  # None: recorded before the census


@dataclass(frozen=True)
class LatencyStats:
    """A latency's distribution over the requests (seconds)."""

    mean: float | None = None
    median: float | None = None
    p90: float | None = None
    p99: float | None = None
    min: float | None = None
    max: float | None = None
    n: int = 0


@dataclass(frozen=True)
class GenerationRequest:
    """One timed generation: its latencies and rates (all of its sequences)."""

    ttft_s: float | None = None
    tpot_s: float | None = None  # None: one new token, no decode step
    e2e_s: float | None = None
    itl_s: list[float] = field(default_factory=list)  # every gap between tokens
    prefill_tokens_per_sec: float | None = None
    decode_tokens_per_sec: float | None = None


@dataclass(frozen=True)
class GenerationMemory:
    """The KV cache's bytes per token (counted and measured), the weights, and how many sequences
    (and how long a one) the free memory holds."""

    kv_bytes_per_token: int | None = None
    kv_bytes_per_token_measured: float | None = None
    weight_bytes: int | None = None
    kv_cache_bytes: int | None = None
    free_bytes: int | None = None  # None: the free memory cannot be read here
    max_batch_size: int | None = None
    max_context_at_batch_1: int | None = None
    batch_size_auto: bool | None = None


@dataclass(frozen=True)
class Generation:
    """`flowrate generate`: lengths, every request's latencies and their distributions, prefill
    and decode rates, KV-cache memory, FLOPs and bytes, prefill MFU and decode bandwidth."""

    batch_size: int | None = None
    prompt_len: int | None = None
    new_tokens: int | None = None
    prefill_logits: str | None = None  # "last" or "all" positions; None: recorded before (all)
    requests: list[GenerationRequest] = field(default_factory=list)
    ttft_s: LatencyStats | None = None
    tpot_s: LatencyStats | None = None  # None: no request decoded
    itl_s: LatencyStats | None = None
    e2e_s: LatencyStats | None = None
    prefill_tokens_per_sec: float | None = None
    decode_tokens_per_sec: float | None = None
    memory: GenerationMemory = field(default_factory=GenerationMemory)
    prefill_flops: float | None = None
    decode_flops: float | None = None
    decode_bytes: float | None = None
    prefill_flops_per_sec: float | None = None
    prefill_mfu: float | None = None
    decode_bytes_per_sec: float | None = None
    decode_bandwidth_utilization: float | None = None
    peak_reason: str | None = None  # why prefill_mfu or the bandwidth utilization is empty


@dataclass(frozen=True)
class SurveyFigure:
    """One figure of a machine survey: what was measured, against its datasheet value where the peak
    table has one, and whether it fell inside its plausibility band. The band applies to
    ``fraction`` where there is a datasheet value, else to ``value``; ``within_band`` is None where
    the figure has no band or no value (``reason`` says why)."""

    name: str = ""  # "matmul bf16", "copy", "h2d pinned", "launch", "train gpt2", …
    value: float | None = None
    unit: str = ""  # "FLOP/s", "B/s", "s" (seconds per call)
    datasheet: float | None = None  # in the figure's unit
    fraction: float | None = None  # value / datasheet
    band_low: float | None = None
    band_high: float | None = None
    within_band: bool | None = None
    reason: str | None = None  # why value, datasheet or band is empty
    detail: str | None = None  # how it was found: the best shape, samples/s, the run's id
    cv: float | None = None  # the measurement's coefficient of variation over its intervals


@dataclass(frozen=True)
class Survey:
    """`flowrate survey`: the machine's figures, each with its datasheet value and band."""

    device: str | None = None  # the device name the peak table was searched for
    quick: bool = False
    seconds_per_measurement: float | None = None
    figures: list[SurveyFigure] = field(default_factory=list)
