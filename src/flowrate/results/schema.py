"""The result record: a versioned, self-describing account of one benchmark run.

Units are in the field names. Readers accept every version up to SCHEMA_VERSION and refuse newer
ones with a message saying to upgrade.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowrate.errors import PathError
from flowrate.io import write_atomic
from flowrate.results.codec import decode, encode
from flowrate.results.configs import Configuration, config_from
from flowrate.results.cost import Cost
from flowrate.results.environment import Environment
from flowrate.results.migrate import upgrade
from flowrate.results.profile import Profile
from flowrate.results.sections import (
    BatchSizeTry,
    Compile,
    Distributed,
    Energy,
    Estimate,
    Fidelity,
    Flops,
    Generation,
    Input,
    Kind,
    Memory,
    Operators,
    ProblemInfo,
    Repeat,
    Streaming,
    Survey,
)
from flowrate.results.serving import Serving
from flowrate.results.solution import Solution
from flowrate.results.validate import InvalidResult, validate_record

# History of the result format (bump on any change a reader must know about):
#   1 (flowrate 0.1.0): config, problem, environment, raw intervals, per-step losses, summary.
#   2: checkpoint intervals and per-interval loss, MFU, power and memory; flops, energy, memory,
#      repeat and fidelity sections; checkpoint-aware summary fields. Version 1 records read with
#      those fields empty.
#   3: streaming section (--execution streaming: copy, compute and host-optimizer times, hidden
#      share, device and pinned host bytes); input section and per-interval input wait
#      (--data); estimate section (the cost model's prediction beside the measurement).
#   4: distributed section (data-parallel runs: world size, backend, each rank's throughput; the
#      headline figures and the intervals are sums over ranks, batch_size is the global batch);
#      config fields global_batch_size and dist_timeout_s. Versions 1-3 read with it empty.
#      Also the compile section (--compile: the first step's seconds, inductor cache hits and
#      misses) and config field compile; the operators section (the counted step op by op:
#      FLOPs, bytes and calls per op and input dtypes; which ops carried FLOPs, which were not
#      counted). Records without them read with them empty. The operators section's census
#      (each row's format and accumulate dtype; FLOPs, bytes and calls per format; the effective
#      precision) and the flops section's mixed_peak_flops, mixed_mfu and mixed_mfu_reason
#      (flowrate.measure.census): records without them read with them absent.
#   5: serving section (`flowrate serve-bench`: the target, the load, every request's raw trace and
#      the metrics under flowrate's, vLLM's and genai-perf's definitions; partial after Ctrl-C).
#      Versions 1-4 read with it empty.
#   6: summary.stdev_samples_per_sec and summary.cv are None where the spread is unknown (one
#      interval; cv also for a mean of 0), where earlier versions wrote 0 (or inf, which no reader
#      accepted). Earlier records read with the numbers they hold.
#   7: the record names its kind (run, check, generate, serve); its sections are typed
#      (flowrate.results.sections) and a section a record predates reads with every field None; a
#      generation's problem keeps the model's shape under problem.settings. Earlier records are
#      brought to this layout by flowrate.results.migrate.upgrade, with the numbers they hold.
#      Also the survey kind and section (`flowrate survey`; records without it read with it empty;
#      a figure without its cv reads with it None).
#      Also the profile section (--profile DIR), the cost section (--price-per-hour,
#      --energy-price) and the solution section (--to-solution): records without them read with
#      them empty, and readers that predate them leave them out. Also cost.prices_from (--prices)
#      and the solution's samples_per_epoch and devices (--scaling): absent ones read as None or
#      empty.
SCHEMA_VERSION = 7


@dataclass(frozen=True)
class IntervalRecord:
    """The raw measurement between two sample points."""

    index: int
    kind: str  # "compute", or "checkpoint" (0 samples: the time a checkpoint took)
    first_step: int
    steps: int
    samples: int
    seconds: float
    samples_per_sec: float  # local throughput of this interval
    rate_samples_per_sec: float  # Rate (smoothed) at the end of the interval
    global_samples_per_sec: float  # GlobalRate at the end of the interval
    elapsed_s: float  # since the clock started
    after_checkpoint: bool = False  # the first compute interval after a checkpoint (Rate may spike)
    loss: float | None = None  # mean loss of the interval's steps
    model_flops_per_sec: float | None = None  # of this interval
    mfu: float | None = None  # of this interval, against the datasheet peak
    power_w: float | None = None  # read at the sample point, where a meter gives one
    device_memory_allocated_bytes: int | None = None  # at the sample point
    process_rss_bytes: int | None = None  # at the sample point
    # --data: seconds the interval's steps waited for their batches (next batch + host-to-device
    # copy), and that wait over the interval's seconds (the input-bound share)
    input_wait_s: float | None = None
    input_bound_share: float | None = None


@dataclass(frozen=True)
class RunSummary:
    """The headline numbers. samples_per_sec is GlobalRate over the whole timed window."""

    samples_per_sec: float
    rate_samples_per_sec: float  # Rate at the last sample point
    steps_per_sec: float
    tokens_per_sec: float | None  # token problems only
    model_flops_per_sec: float  # analytic model FLOPs per sample x samples_per_sec
    median_samples_per_sec: float  # over intervals
    mean_samples_per_sec: float
    stdev_samples_per_sec: float | None  # None with one interval: its spread is unknown, not 0
    cv: float | None  # None with one interval, or a mean of 0
    min_samples_per_sec: float
    max_samples_per_sec: float
    p5_samples_per_sec: float | None  # None with fewer than 20 intervals
    p95_samples_per_sec: float | None
    ci95_low_samples_per_sec: float | None  # 95% CI of the mean interval rate
    ci95_high_samples_per_sec: float | None
    timed_steps: int
    timed_samples: int
    timed_duration_s: float
    intervals: int
    sample_every_steps: int
    preheat_steps: int
    preheat_s: float
    final_loss: float | None
    # Checkpoints (--checkpoint-every): samples_per_sec above is GlobalRate as experienced, with
    # checkpoint time included; compute_samples_per_sec leaves the checkpoint intervals out.
    compute_samples_per_sec: float | None = None
    checkpoints: int = 0
    checkpoint_s: float = 0.0
    checkpoint_overhead: float = 0.0  # checkpoint seconds / timed seconds


@dataclass(frozen=True)
class Result:
    """One record: how it was configured, what ran, on what, every interval, the headline summary,
    and one section per concern (None or empty where the run had no such concern)."""

    config: Configuration  # the kind's (flowrate.results.configs)
    problem: ProblemInfo
    batch_size: int
    environment: Environment
    intervals: list[IntervalRecord]
    losses: list[float]
    summary: RunSummary
    warnings: list[str] = field(default_factory=list)
    # attempts of --batch-size auto, largest first
    batch_size_search: list[BatchSizeTry] = field(default_factory=list)
    # model and executed FLOPs, FLOP/s, MFU against the datasheet peak, bandwidth
    flops: Flops = field(default_factory=Flops)
    # joules, watts, samples/J and FLOP/J over the timed window; joules None with the reason
    energy: Energy = field(default_factory=Energy)
    # device peak allocated and reserved, process peak RSS
    memory: Memory = field(default_factory=Memory)
    # --repeat N: each run's figures and the across-run statistics (None for a single run)
    repeat: Repeat | None = None
    # `flowrate check`: the loss a learnable task reached and the steps it took (None for runs)
    fidelity: Fidelity | None = None
    # --execution streaming: where the time went per step and what memory it held (None: resident)
    streaming: Streaming | None = None
    # --data: the dataset, the loader's settings and the input-bound share (None: synthetic data)
    input: Input | None = None
    # the cost model's estimate for this configuration on this device (None where none was made)
    estimate: Estimate | None = None
    # data-parallel runs (torchrun): world size, backend, per-rank figures (None: one process)
    distributed: Distributed | None = None
    # --compile: the first (compiling) step's seconds and whether inductor's cache was hit
    compile: Compile | None = None
    # the executed-FLOPs count of one step, op by op, and its coverage (None: not counted)
    operators: Operators | None = None
    # `flowrate generate`: lengths, TTFT/TPOT/ITL/E2E per request, prefill and decode rates,
    # KV-cache memory, prefill MFU and decode bandwidth (None for runs; records without it read with
    # it empty)
    generation: Generation | None = None
    # `flowrate serve-bench`: load, raw per-request traces, metrics by definition (None for runs)
    serving: Serving | None = None
    # `flowrate survey`: the machine's achievable figures against its datasheet (None otherwise)
    survey: Survey | None = None
    # --profile DIR: the profiled steps' breakdown and the operators losing most time (None: none
    # taken; records without it read with it empty)
    profile: Profile | None = None
    # --price-per-hour / --energy-price: samples per dollar and the like (None: no price given)
    cost: Cost | None = None
    # --to-solution: a job's projected wall time and cost at the measured rate (None: not asked)
    solution: Solution | None = None
    kind: Kind = Kind.RUN
    run_id: str = ""
    created_at: str = ""
    flowrate_version: str = ""
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return encode(self)

    def to_json(self, indent: int | None = 2) -> str:
        """Strict JSON: a NaN or an infinity is refused (naming the field), never written."""
        data = self.to_dict()
        try:
            return json.dumps(data, indent=indent, allow_nan=False)
        except ValueError:
            validate_record(data, SCHEMA_VERSION)  # raises InvalidResult naming the field
            raise

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        """The record as a Result, once validate_record has found nothing a reader would trip on:
        a record of an earlier version is brought to this version's layout first (upgrade)."""
        validate_record(data, SCHEMA_VERSION)
        record = upgrade(dict(data), SCHEMA_VERSION)
        config = config_from(Kind(record["kind"]), record["config"])  # typed by the record's kind
        return decode(cls, {**record, "config": config})

    @classmethod
    def from_json(cls, text: str) -> Result:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise InvalidResult(f"not a flowrate result: invalid JSON ({error})") from None
        except RecursionError:
            raise InvalidResult("not a flowrate result: the JSON is nested too deeply") from None
        if not isinstance(data, dict):
            raise InvalidResult("not a flowrate result: the JSON is not an object")
        return cls.from_dict(data)

    def save(self, path: str | Path) -> None:
        write_atomic(path, self.to_json() + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Result:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise PathError(f"cannot read result {path}", error) from None
        except UnicodeDecodeError:
            raise InvalidResult(f"{path} is not a flowrate result: it is not UTF-8 text") from None
        try:
            return cls.from_json(text)
        except InvalidResult as error:
            raise InvalidResult(f"{path}: {error}") from None  # the file is what the user named
