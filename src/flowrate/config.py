"""RunConfig: one typed, validated description of a benchmark run.

Every field has a docstring-style comment, and validation happens at construction: a bad value
raises ``ConfigError`` naming the field and saying what would be valid.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any

from flowrate.errors import ConfigError, FlowrateError


class Mode(enum.StrEnum):
    """What a step does: a full training step, or a forward pass only."""

    TRAIN = "train"
    INFER = "infer"

    @classmethod
    def parse(cls, value: str | Mode) -> Mode:
        aliases = {"training": "train", "inference": "infer", "eval": "infer"}
        text = str(value).lower()
        try:
            return cls(aliases.get(text, text))
        except ValueError:
            raise ConfigError("mode", f"unknown mode {value!r}; use train or infer") from None


class Precision(enum.StrEnum):
    """Numeric policy of a step.

    fp32: everything in fp32, TF32 off. tf32: fp32 with TF32 matmuls (CUDA, Ampere and newer).
    bf16 / fp16: autocast mixed precision over fp32 master weights; fp16 adds dynamic loss
    scaling (GradScaler). pure-bf16: weights, gradients and optimizer state in bf16.
    """

    FP32 = "fp32"
    TF32 = "tf32"
    BF16 = "bf16"
    FP16 = "fp16"
    PURE_BF16 = "pure-bf16"

    @classmethod
    def parse(cls, value: str | Precision) -> Precision:
        text = str(value).lower().replace("_", "-")
        aliases = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16"}
        try:
            return cls(aliases.get(text, text))
        except ValueError:
            valid = ", ".join(p.value for p in cls)
            raise ConfigError("precision", f"unknown precision {value!r}; use one of {valid}") from None


class OptimizerName(enum.StrEnum):
    ADAMW = "adamw"
    SGD = "sgd"

    @classmethod
    def parse(cls, value: str | OptimizerName) -> OptimizerName:
        try:
            return cls(str(value).lower())
        except ValueError:
            raise ConfigError("optimizer", f"unknown optimizer {value!r}; use adamw or sgd") from None


class Execution(enum.StrEnum):
    """Where the weights live: on the device (resident), or in host memory, streamed to the
    device one block at a time with the optimizer update on the host (streaming)."""

    RESIDENT = "resident"
    STREAMING = "streaming"

    @classmethod
    def parse(cls, value: str | Execution) -> Execution:
        try:
            return cls(str(value).lower())
        except ValueError:
            valid = ", ".join(e.value for e in cls)
            raise ConfigError("execution", f"unknown execution mode {value!r}; use {valid}") from None


AUTO = "auto"


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one benchmark run. Invalid values fail at construction."""

    # Zoo name ("transformer", "gpt2", "resnet50", …) or a user problem "path/to/file.py:factory".
    problem: str = "transformer"
    # Named size of the problem family ("debug", "gpt2-medium", …); None takes the family default.
    size: str | None = None
    # Overrides of the problem's shape (seq_len, image_size, layers, …; kernels: m, n, k, …).
    problem_options: dict[str, int] = field(default_factory=dict)
    # None takes the problem's default mode (train for models, infer for kernels).
    mode: Mode | None = None
    # Samples per step; None takes the problem's default; "auto" halves from max_batch_size
    # until a step fits in memory.
    batch_size: int | str | None = None
    # Where "auto" starts its search.
    max_batch_size: int = 256
    # Data-parallel runs: samples per step over all ranks, divided evenly among them (the world
    # size must divide it); instead of batch_size, which is per rank. A single process takes it
    # whole.
    global_batch_size: int | None = None
    precision: Precision = Precision.FP32
    optimizer: OptimizerName = OptimizerName.ADAMW
    learning_rate: float = 1e-4
    execution: Execution = Execution.RESIDENT
    # Streaming: recompute each block's activations in backward instead of keeping them.
    recompute: bool = False
    # Clip the global gradient norm to this value before the optimizer step (None: no clipping).
    clip_grad_norm: float | None = None
    # Compile the step's loss function with torch.compile, its artifacts cached on disk per
    # configuration (flowrate.execution.compile): `flowrate compile` fills the cache.
    compile: bool = False
    # CUDA only: cap this process's device memory at this many GiB (a per-process fraction).
    device_memory_limit_gib: float | None = None
    # "auto" (cuda when present, else cpu), "cpu", "cuda" or "cuda:N".
    device: str = AUTO
    seed: int = 0
    # torch.set_num_threads for the CPU; None leaves PyTorch's choice.
    threads: int | None = None
    # Untimed warm-up steps before the clock starts.
    preheat_steps: int = 5
    # Exactly this many timed steps; None measures until both min_steps and duration_s are met.
    steps: int | None = None
    min_steps: int = 10
    # Minimum timed duration in seconds (ignored when steps is set).
    duration_s: float = 10.0
    # Steps between sample points; None picks enough for target_interval_s.
    sample_every: int | None = None
    target_interval_s: float = 0.2
    # Rate's smoothing factor α: Rate_k = (1 − α)·local_k + α·Rate_{k−1}.
    smoothing: float = 0.4
    # Save model and optimizer state every this many timed steps into checkpoint_dir; checkpoint
    # time is recorded as its own kind of interval.
    checkpoint_every: int | None = None
    checkpoint_dir: str | None = None
    # Before the run, time a large GEMM at the run's precision: MFU is then also reported against
    # this measured peak.
    measure_peak: bool = False
    # A dataset folder (`flowrate data make` / `data import-*`) to read every step's batch from,
    # instead of synthetic batches made on the device; the result records the input-bound share.
    data_dir: str | None = None
    # Loader worker processes reading the dataset (0: read in the training loop's own thread).
    loader_workers: int = 2
    # Batches each loader worker keeps ready ahead of the step.
    prefetch: int = 2
    # Records per shuffle window of the loader (indices only: it holds no data).
    shuffle_buffer: int = 4096
    # Data-parallel runs: seconds a collective may wait for the other ranks before the run stops
    # with an error (a rank that died or hangs), and how long start-up waits for every rank.
    dist_timeout_s: float = 300.0

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise parsed enums in place
        if self.mode is not None:
            set_(self, "mode", Mode.parse(self.mode))
        set_(self, "precision", Precision.parse(self.precision))
        set_(self, "optimizer", OptimizerName.parse(self.optimizer))
        set_(self, "execution", Execution.parse(self.execution))
        if not self.problem or not isinstance(self.problem, str):
            raise ConfigError("problem", "name a zoo problem (see `flowrate list`) or PATH.py:FACTORY")
        if isinstance(self.batch_size, str):
            if self.batch_size.lower() != AUTO:
                _positive_int("batch_size", _to_int("batch_size", self.batch_size))
                set_(self, "batch_size", int(self.batch_size))
            else:
                set_(self, "batch_size", AUTO)
        elif self.batch_size is not None:
            _positive_int("batch_size", self.batch_size)
        _positive_int("max_batch_size", self.max_batch_size)
        if self.global_batch_size is not None:
            _positive_int("global_batch_size", self.global_batch_size)
            if self.batch_size is not None:
                raise ConfigError("global_batch_size", "give it or --batch-size (per rank), not both")
        for name in ("min_steps", "target_interval_s", "duration_s", "learning_rate", "dist_timeout_s"):
            _positive_number(name, getattr(self, name))
        for name in ("clip_grad_norm", "device_memory_limit_gib"):
            if getattr(self, name) is not None:
                _positive_number(name, getattr(self, name))
        if self.recompute and self.execution is not Execution.STREAMING:
            raise ConfigError("recompute", "applies to --execution streaming only")
        if self.compile and self.execution is not Execution.RESIDENT:
            raise ConfigError("compile", "applies to --execution resident only")
        for name in ("steps", "sample_every", "threads", "checkpoint_every"):
            value = getattr(self, name)
            if value is not None:
                _positive_int(name, value)
        if not isinstance(self.preheat_steps, int) or self.preheat_steps < 0:
            raise ConfigError("preheat_steps", f"must be 0 or more, got {self.preheat_steps!r}")
        if not 0.0 <= self.smoothing < 1.0:
            raise ConfigError("smoothing", f"must be in [0, 1), got {self.smoothing!r}")
        for key, value in self.problem_options.items():
            _option_int(key, value)
        _check_device(self.device)
        if (self.checkpoint_every is None) != (self.checkpoint_dir is None):
            missing = "checkpoint_dir" if self.checkpoint_dir is None else "checkpoint_every"
            raise ConfigError(missing, "--checkpoint-every and --checkpoint-dir go together; give both")
        self._check_loader()

    def _check_loader(self) -> None:
        if isinstance(self.loader_workers, bool) or not isinstance(self.loader_workers, int):
            raise ConfigError("loader_workers", f"must be an integer 0 or more, got {self.loader_workers!r}")
        if self.loader_workers < 0:
            raise ConfigError("loader_workers", f"must be 0 or more, got {self.loader_workers}")
        for name in ("prefetch", "shuffle_buffer"):
            _positive_int(name, getattr(self, name))
        if self.data_dir is None:
            for name in ("loader_workers", "prefetch", "shuffle_buffer"):
                if getattr(self, name) != _LOADER_DEFAULTS[name]:
                    raise ConfigError(name, "applies with --data DIR only (synthetic batches need no loader)")

    @property
    def settled_mode(self) -> Mode:
        """The mode, once for_problem() has settled it."""
        if self.mode is None:
            raise FlowrateError("the run's mode is not settled: call RunConfig.for_problem first")
        return self.mode

    def for_problem(self, modes: tuple[Mode, ...], default_mode: Mode, name: str) -> RunConfig:
        """This config with the mode settled for a problem that runs ``modes``."""
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
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def _to_int(name: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ConfigError(name, f"must be a positive integer or 'auto', got {value!r}") from None


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(name, f"must be a positive integer, got {value!r}")


def _option_int(name: str, value: object) -> None:
    # 0 is a valid option value (causal=0); each family's config rejects what it cannot take
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(name, f"must be an integer 0 or more, got {value!r}")


def _positive_number(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(name, f"must be a positive number, got {value!r}")


def _check_device(device: str) -> None:
    if device in (AUTO, "cpu", "cuda"):
        return
    prefix, _, index = device.partition(":")
    if prefix == "cuda" and index.isdigit():
        return
    raise ConfigError("device", f"unknown device {device!r}; use auto, cpu, cuda or cuda:N")


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
