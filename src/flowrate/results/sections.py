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
