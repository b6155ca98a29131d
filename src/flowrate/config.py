"""RunConfig: one typed, validated description of a benchmark run.

Every field has a docstring, and validation happens at construction, one concern at a time: a
bad value raises ``ConfigError`` naming the field and saying what would be valid.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

from flowrate.choices import Execution, FreedMemory, Mode, OptimizerName, Precision
from flowrate.errors import ConfigError, FlowrateError

AUTO = "auto"


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one benchmark run. Invalid values fail at construction.

    One flat record (its fields are the run's JSON and the CLI's flags), read in groups: what
    runs, the batch, the step, where it runs, the timed loop, checkpoints, the dataset, and
    data-parallel runs. Each group is checked by its own function below.
    """

    # --- what runs ---
    problem: str = "transformer"
    """Zoo name ("transformer", "gpt2", "resnet50", …) or a user problem "path/to/file.py:factory"."""
    size: str | None = None
    """Named size of the problem family ("debug", "gpt2-medium", …); None takes the family default."""
    problem_options: dict[str, int | str] = field(default_factory=dict)
    """Overrides of the problem's shape (seq_len, image_size, layers, …; kernels: m, n, k, …);
    a library model's config values from --hf-config stay strings, typed by the model's config."""
    mode: Mode | None = None
    """None takes the problem's default mode (train for models, infer for kernels)."""

    # --- the batch ---
    batch_size: int | str | None = None
    """Samples per step; None takes the problem's default; "auto" halves from max_batch_size until a
    step fits in memory."""
    max_batch_size: int = 256
    """Where "auto" starts its search."""
    global_batch_size: int | None = None
    """Data-parallel runs: samples per step over all ranks, divided evenly among them (the world
    size must divide it); instead of batch_size, which is per rank. A single process takes it whole."""

    # --- the step ---
    precision: Precision = Precision.FP32
    """Numeric policy of the step (see Precision)."""
    optimizer: OptimizerName = OptimizerName.ADAMW
    """The optimizer of a training step."""
    learning_rate: float = 1e-4
    """The optimizer's learning rate."""
    execution: Execution = Execution.RESIDENT
    """Where the weights live: on the device, or streamed from host memory (see Execution)."""
    recompute: bool = False
    """Streaming: recompute each block's activations in backward instead of keeping them."""
    resident_blocks: int | None = None
    """Streaming: how many outermost blocks (first, last, second, …) stay on the device with a
    device optimizer; None: the end blocks that fit in 1/8 of a CUDA device's memory, none on a CPU."""
    clip_grad_norm: float | None = None
    """Clip the global gradient norm to this value before the optimizer step (None: no clipping)."""
    compile: bool = False
    """Compile the step's loss function with torch.compile, its artifacts cached on disk per
    configuration (flowrate.execution.compile): `flowrate compile` fills the cache."""
    device_memory_limit_gib: float | None = None
    """CUDA only: cap this process's device memory at this many GiB (a per-process fraction)."""

    # --- where it runs ---
    device: str = AUTO
    """Where it runs: "auto" (cuda when present, else cpu), "cpu", "cuda" or "cuda:N"."""
    seed: int = 0
    """Seeds the model's weights, the batches and the loader's shuffle (each data-parallel rank adds
    its rank)."""
    threads: int | None = None
    """torch.set_num_threads for the CPU; None leaves PyTorch's choice."""
    freed_memory: FreedMemory = FreedMemory.KEEP
    """keep: host memory a step frees stays in the process for the next step (no page faults on
    reuse); release: the C library's default, which hands large freed blocks back to the OS. Once
    a process keeps, it keeps: a release run needs a fresh process."""

    # --- the timed loop ---
    preheat_steps: int = 5
    """Untimed warm-up steps before the clock starts."""
    steps: int | None = None
    """Exactly this many timed steps; None measures until both min_steps and duration_s are met."""
    min_steps: int = 10
    """Fewest timed steps when steps is None."""
    duration_s: float = 10.0
    """Minimum timed duration in seconds (ignored when steps is set)."""
    sample_every: int | None = None
    """Steps between sample points; None picks enough for target_interval_s."""
    target_interval_s: float = 0.2
    """The seconds an interval between sample points aims at when sample_every is None."""
    smoothing: float = 0.4
    """Rate's smoothing factor α: Rate_k = (1 − α)·local_k + α·Rate_{k−1}."""

    # --- checkpoints and extra measurements ---
    checkpoint_every: int | None = None
    """Save model and optimizer state every this many timed steps into checkpoint_dir; checkpoint
    time is recorded as its own kind of interval."""
    checkpoint_dir: str | None = None
    """Where checkpoints go; given together with checkpoint_every."""
    keep_checkpoints: int | None = None
    """Keep only the newest this many checkpoints in checkpoint_dir, deleting older ones after each
    save; None keeps them all."""
    measure_peak: bool = False
    """Before the run, time a large GEMM at the run's precision: MFU is then also reported against
    this measured peak."""

    # --- the dataset ---
    data_dir: str | None = None
    """A dataset folder (`flowrate data make` / `data import-*`) to read every step's batch from,
    instead of synthetic batches made on the device; the result records the input-bound share."""
    loader_workers: int = 2
    """Loader worker processes reading the dataset (0: read in the training loop's own thread)."""
    prefetch: int = 2
    """Batches each loader worker keeps ready ahead of the step."""
    shuffle_buffer: int = 4096
    """Records per shuffle window of the loader (indices only: it holds no data)."""

    # --- data-parallel runs ---
    dist_timeout_s: float = 300.0
    """Seconds a collective may wait for the other ranks before the run stops with an error (a
    rank that died or hangs), and how long start-up waits for every rank."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise parsed values in place
        if self.mode is not None:
            set_(self, "mode", Mode.parse(self.mode))
        set_(self, "precision", Precision.parse(self.precision))
        set_(self, "optimizer", OptimizerName.parse(self.optimizer))
        set_(self, "execution", Execution.parse(self.execution))
        set_(self, "freed_memory", FreedMemory.parse(self.freed_memory))
        _check_problem(self)
        set_(self, "batch_size", parse_batch_size(self.batch_size))
        for check in _CHECKS:
            check(self)

    @property
    def settled_mode(self) -> Mode:
        """The mode, once for_problem() has settled it."""
        if self.mode is None:
            raise FlowrateError("the run's mode is not settled: call RunConfig.for_problem first")
        return self.mode

    def for_problem(self, modes: tuple[Mode, ...], default_mode: Mode, name: str) -> RunConfig:
        """This config with the mode settled for a problem that runs ``modes`` (inference for a
        format that only infers)."""
        if self.precision.inference_only and Mode.INFER in modes:
            default_mode = Mode.INFER
        mode = self.mode or default_mode
        if mode not in modes:
            only = " or ".join(m.value for m in modes)
            raise ConfigError("mode", f"{name} runs {only} only; use --mode {modes[0].value}")
        return self if mode is self.mode else self.replace(mode=mode)

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        for key, value in data.items():
            if isinstance(value, enum.Enum):
                data[key] = value.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


# --- validation, one concern at a time: each names the field and says what would be valid ---

INT32_MAX = 2**31 - 1  # a batch or a shape beyond it reaches C++ kernels as an overflow
MAX_STEPS = 10**9  # steps no run finishes: a typo, refused before it runs forever
CHECK_STEPS = 300  # steps a `flowrate check` trains when given no length (and explore's checks)
WEEK_S = 7 * 24 * 3600


@dataclass(frozen=True)
class Bounds:
    """The numbers a numeric setting may take, and how to say so. One table (BOUNDS) serves
    RunConfig's validation and the CLI's parsing of the same flags (flowrate/cli/options.py)."""

    says: str  # what a valid value is, e.g. "a positive integer"
    low: float
    high: float  # math.inf: any finite number
    integer: bool = True
    low_open: bool = False  # low itself is not valid
    high_open: bool = False  # high itself is not valid (then ``says`` states the range)
    high_note: str = ""  # after the upper bound, e.g. " (2**31 - 1)"

    def fault(self, value: object) -> str | None:
        """Why ``value`` is not a valid setting, in words; None when it is."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"must be {self.says}, got {value!r}"
        if self.integer and not isinstance(value, int):
            return f"must be {self.says}, got {value!r}"
        if math.isnan(value) or value < self.low or (self.low_open and value == self.low):
            return f"must be {self.says}, got {value!r}"
        if self.high_open and value >= self.high:
            return f"must be {self.says}, got {value!r}"
        if value > self.high:
            return f"must be at most {self.high}{self.high_note}, got {value!r}"
        if value == math.inf:  # no bound but finiteness
            return f"must be a finite number, got {value!r}"
        return None

    def check(self, name: str, value: object) -> None:
        fault = self.fault(value)
        if fault is not None:
            raise ConfigError(name, fault)


_COUNT = Bounds("a positive integer", 1, INT32_MAX, high_note=" (2**31 - 1)")
_STEPS = Bounds("a positive integer", 1, MAX_STEPS)
_POSITIVE = Bounds("a positive number", 0, math.inf, integer=False, low_open=True)
_SECONDS = Bounds("a positive number", 0, WEEK_S, integer=False, low_open=True, high_note=" s (7 days)")

BOUNDS: dict[str, Bounds] = {
    "batch_size": _COUNT,
    "max_batch_size": _COUNT,
    "global_batch_size": _COUNT,
    "learning_rate": _POSITIVE,
    "clip_grad_norm": _POSITIVE,
    "resident_blocks": Bounds("an integer 0 or more", 0, 1024),
    "device_memory_limit_gib": _POSITIVE,
    "seed": Bounds("an integer 0 or more", 0, 2**63 - 1, high_note=" (2**63 - 1)"),
    "threads": Bounds("a positive integer", 1, 1024),
    "preheat_steps": Bounds("0 or more", 0, MAX_STEPS),
    "steps": _STEPS,
    "min_steps": _STEPS,
    "duration_s": _SECONDS,
    "sample_every": _STEPS,
    "target_interval_s": _SECONDS,
    "smoothing": Bounds("in [0, 1)", 0, 1, integer=False, high_open=True),
    "checkpoint_every": _STEPS,
    "keep_checkpoints": _COUNT,
    "loader_workers": Bounds("an integer 0 or more", 0, 256),
    "prefetch": Bounds("a positive integer", 1, 1024),
    "shuffle_buffer": Bounds("a positive integer", 1, 10**8),
    "dist_timeout_s": _SECONDS,
}
# -O KEY=VALUE and the shape flags: 0 is valid (causal=0); each family's config refuses the rest
OPTION_BOUNDS = Bounds("an integer 0 or more", 0, INT32_MAX, high_note=" (2**31 - 1)")


def _check_problem(config: RunConfig) -> None:
    if not config.problem or not isinstance(config.problem, str):
        raise ConfigError("problem", "name a zoo problem (see `flowrate list`) or PATH.py:FACTORY")
    for key, value in config.problem_options.items():
        if not isinstance(value, str):
            OPTION_BOUNDS.check(key, value)


def parse_batch_size(value: int | str | None) -> int | str | None:
    """A batch size as given ("16", 16, "AUTO", None) in its one spelling (16, "auto", None)."""
    if isinstance(value, str):
        if value.lower() == AUTO:
            return AUTO
        value = _to_int("batch_size", value)
    if value is not None:
        BOUNDS["batch_size"].check("batch_size", value)
    return value


def _check_numbers(config: RunConfig) -> None:
    """Every numeric field within its bounds (None: the field is unset, or takes a default)."""
    for name, bounds in BOUNDS.items():
        value = getattr(config, name)
        if value is not None and name != "batch_size":  # checked with its spelling, "auto"
            bounds.check(name, value)


def _check_batch(config: RunConfig) -> None:
    if config.global_batch_size is not None and config.batch_size is not None:
        raise ConfigError("global_batch_size", "give it or --batch-size (per rank), not both")


def _check_execution(config: RunConfig) -> None:
    """Options that belong to one way of holding the weights."""
    if config.recompute and config.execution is not Execution.STREAMING:
        raise ConfigError("recompute", "applies to --execution streaming only")
    if config.resident_blocks is not None and config.execution is not Execution.STREAMING:
        raise ConfigError("resident_blocks", "applies to --execution streaming only")
    if config.compile and config.execution is not Execution.RESIDENT:
        raise ConfigError("compile", "applies to --execution resident only")
    quantized = config.precision.inference_only or config.precision is Precision.FP8
    if quantized and config.execution is not Execution.RESIDENT:
        raise ConfigError("precision", f"{config.precision} runs with --execution resident only")
    if config.precision.inference_only and config.mode is Mode.TRAIN:
        raise ConfigError(
            "precision",
            f"{config.precision} quantizes a model for inference and cannot train; use --mode infer "
            "(or fp8 to train in a low-precision format)",
        )


def _check_device(config: RunConfig) -> None:
    device = config.device
    if device in (AUTO, "cpu", "cuda"):
        return
    prefix, _, index = device.partition(":")
    if prefix == "cuda" and index.isdigit():
        return
    raise ConfigError("device", f"unknown device {device!r}; use auto, cpu, cuda or cuda:N")


def _check_checkpoints(config: RunConfig) -> None:
    if (config.checkpoint_every is None) != (config.checkpoint_dir is None):
        missing = "checkpoint_dir" if config.checkpoint_dir is None else "checkpoint_every"
        raise ConfigError(missing, "--checkpoint-every and --checkpoint-dir go together; give both")
    if config.keep_checkpoints is not None and config.checkpoint_dir is None:
        raise ConfigError("keep_checkpoints", "applies with --checkpoint-every and --checkpoint-dir only")


def _check_loader(config: RunConfig) -> None:
    """The loader's settings are left at their defaults without a dataset."""
    if config.data_dir is None:
        for name in ("loader_workers", "prefetch", "shuffle_buffer"):
            if getattr(config, name) != _LOADER_DEFAULTS[name]:
                raise ConfigError(name, "applies with --data DIR only (synthetic batches need no loader)")


# in field order, after the problem and the batch size's spelling (the batch checks read it)
_CHECKS: tuple[Callable[[RunConfig], None], ...] = (
    _check_numbers,
    _check_batch,
    _check_execution,
    _check_device,
    _check_checkpoints,
    _check_loader,
)


def _to_int(name: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ConfigError(name, f"must be a positive integer or 'auto', got {value!r}") from None


# RunConfig fields whose flag is not simply the field's name with dashes
FLAG_NAMES = {
    "duration_s": "duration",
    "preheat_steps": "preheat",
    "learning_rate": "lr",
    "target_interval_s": "target_interval",
    "device_memory_limit_gib": "device_memory_limit",
    "data_dir": "data",
    "dist_timeout_s": "dist_timeout",
}

_LOADER_DEFAULTS = {f.name: f.default for f in dataclasses.fields(RunConfig)}


def positive_ints(text: str, field_name: str, example: str) -> list[int]:
    """'4,1,2' -> [1, 2, 4]: the distinct positive integers of a comma list, ascending; ConfigError
    naming ``field_name`` otherwise (``example`` shows the form)."""
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ConfigError(field_name, f"expected numbers like {example}, got {text!r}") from None
    if not values or values[0] < 1:
        raise ConfigError(field_name, f"expected positive numbers like {example}, got {text!r}")
    return values
