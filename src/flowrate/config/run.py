"""RunConfig: one typed, validated description of a benchmark run.

Every field has a docstring and a Setting (flowrate.config.setting): its help, flags, bounds and
unit, from which the command line's options, a sweep's keys and the reference table are made.
Validation happens at construction, one concern at a time (flowrate.config.run_checks): a bad value
raises ``ConfigError`` naming the field and saying what would be valid.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Self

from flowrate.choices import Execution, FreedMemory, Mode, OptimizerName, Precision
from flowrate.config.bounds import COUNT, MAX_STEPS, POSITIVE, SECONDS, SEED, STEPS, THREADS, Bounds
from flowrate.config.run_checks import CHECKS, check_problem
from flowrate.config.setting import setting, setting_of, settings
from flowrate.config.values import AUTO, BadValue, to_batch
from flowrate.errors import ConfigError, FlowrateError


def profile_dir_setting() -> Any:
    """The --profile DIR setting, as RunConfig and GenerateConfig both declare it (one definition):
    a folder for the profile taken after the timed measurement (flowrate.harness.profiling)."""
    return setting(
        None,
        help="After the timed run, profile a few steps (generate: short generations) with "
        "torch.profiler: the trace, the operator table against the roofline and the cost model, "
        "and the step breakdown go into DIR.",
        flags=("--profile",),
        kind="folder",
        metavar="DIR",
        sweepable=False,
    )


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one benchmark run. Invalid values fail at construction.

    One flat record (its fields are the run's JSON and the CLI's flags), read in groups: what
    runs, the batch, the step, where it runs, the timed loop, checkpoints, the dataset, and
    data-parallel runs. Each group is checked by its own function below.
    """

    # --- what runs ---
    problem: str = setting(
        "transformer",
        help="Zoo problem (see `flowrate list`) or PATH.py:FACTORY.",
        flags=("-p", "--problem"),
    )
    """Zoo name ("transformer", "gpt2", "resnet50", …) or a user problem "path/to/file.py:factory"."""
    size: str | None = setting(
        None,
        help="Named size of the problem family, e.g. debug or gpt2-medium.",
        default_help="the family's",
    )
    """Named size of the problem family ("debug", "gpt2-medium", …); None takes the family default."""
    problem_options: dict[str, int | str] = setting(
        factory=dict,
        help="Any shape option of the problem, e.g. -O m=4096 for gemm (see `flowrate list`).",
        flags=("-O", "--option"),
        kind="options",
        default_help="",
        metavar="KEY=VALUE",
        own_option=False,
    )
    """Overrides of the problem's shape (seq_len, image_size, layers, …; kernels: m, n, k, …);
    a library model's config values from --hf-config stay strings, typed by the model's config."""
    mode: Mode | None = setting(
        None,
        help="train: forward, backward, optimizer step; infer: forward only.",
        default_help="train; infer for kernels",
        spellings=("training", "inference"),
    )
    """None takes the problem's default mode (train for models, infer for kernels)."""

    # --- the batch ---
    batch_size: int | str | None = setting(
        None,
        help="Samples per step, or 'auto' to halve from --max-batch-size until a step fits in memory.",
        flags=("-b", "--batch-size"),
        kind="batch",
        bounds=COUNT,
        unit="samples",
        metavar="N|auto",
        default_help="the problem's",
    )
    """Samples per step; None takes the problem's default; "auto" halves from max_batch_size until a
    step fits in memory."""
    max_batch_size: int = setting(256, help="Where --batch-size auto starts.", bounds=COUNT, unit="samples")
    """Where "auto" starts its search."""
    global_batch_size: int | None = setting(
        None,
        help="Data-parallel runs (torchrun): samples per step over all ranks, split evenly; "
        "instead of --batch-size, which is per rank.",
        bounds=COUNT,
        unit="samples",
    )
    """Data-parallel runs: samples per step over all ranks, divided evenly among them (the world
    size must divide it); instead of batch_size, which is per rank. A single process takes it whole."""

    # --- the step ---
    precision: Precision = setting(
        Precision.FP32,
        help="fp32, tf32 (CUDA), bf16 / fp16 autocast (fp16 with loss scaling), pure-bf16.",
    )
    """Numeric policy of the step (see Precision)."""
    optimizer: OptimizerName = setting(OptimizerName.ADAMW, help="Optimizer of training steps.")
    """The optimizer of a training step."""
    learning_rate: float = setting(1e-4, help="Learning rate.", flags=("--lr",), bounds=POSITIVE)
    """The optimizer's learning rate."""
    execution: Execution = setting(
        Execution.RESIDENT,
        help="Where the weights live: resident on the device, or streaming (weights and optimizer "
        "in host memory, streamed to the device one block at a time).",
    )
    """Where the weights live: on the device, or streamed from host memory (see Execution)."""
    recompute: bool = setting(
        False, help="Streaming: recompute each block's activations in backward instead of keeping them."
    )
    """Streaming: recompute each block's activations in backward instead of keeping them."""
    resident_blocks: int | None = setting(
        None,
        help="Streaming: keep the N outermost blocks (first, last, second, …) on the device with a "
        "device optimizer.",
        kind="count_or_auto",
        bounds=Bounds("an integer 0 or more", 0, 1024),
        unit="blocks",
        metavar="N|auto",
        default_help="auto: the end blocks that fit in 1/8 of a CUDA device's memory",
    )
    """Streaming: how many outermost blocks (first, last, second, …) stay on the device with a
    device optimizer; None: the end blocks that fit in 1/8 of a CUDA device's memory, none on a CPU."""
    clip_grad_norm: float | None = setting(
        None,
        help="Clip the global gradient norm to this value before each optimizer step.",
        bounds=POSITIVE,
    )
    """Clip the global gradient norm to this value before the optimizer step (None: no clipping)."""
    compile: bool = setting(
        False,
        help="Compile the step with torch.compile, reusing what `flowrate compile` cached for this "
        "configuration (the compile time and cache hit are recorded).",
    )
    """Compile the step's loss function with torch.compile, its artifacts cached on disk per
    configuration (flowrate.execution.compile): `flowrate compile` fills the cache."""
    device_memory_limit_gib: float | None = setting(
        None,
        help="CUDA: cap this process's device memory (a per-process fraction), e.g. to prove a "
        "streamed model fits in 16 GiB.",
        flags=("--device-memory-limit",),
        bounds=POSITIVE,
        unit="GiB",
        metavar="GIB",
    )
    """CUDA only: cap this process's device memory at this many GiB (a per-process fraction)."""

    # --- where it runs ---
    device: str = setting(AUTO, help="auto (cuda when present, else cpu), cpu, cuda or cuda:N.")
    """Where it runs: "auto" (cuda when present, else cpu), "cpu", "cuda" or "cuda:N"."""
    seed: int = setting(
        0,
        help="Seed of weights and synthetic data.",
        bounds=SEED,
    )
    """Seeds the model's weights, the batches and the loader's shuffle (each data-parallel rank adds
    its rank)."""
    threads: int | None = setting(
        None,
        help="CPU threads for PyTorch (torch.set_num_threads).",
        bounds=THREADS,
        unit="threads",
        default_help="PyTorch's",
    )
    """torch.set_num_threads for the CPU; None leaves PyTorch's choice."""
    freed_memory: FreedMemory = setting(
        FreedMemory.RELEASE,
        help="release: the C library's default, what a plain PyTorch process gets (glibc returns "
        "large freed blocks to the OS, so each step's large tensors pay page faults again); keep: "
        "host memory a step frees stays in the process for the next step, labelled in the record.",
    )
    """release: the C library's default, which hands large freed blocks back to the OS, as in a
    plain PyTorch process; keep: host memory a step frees stays in the process for the next step
    (no page faults on reuse). Once a process keeps, it keeps: a release run after a keep run in
    one process is measured kept, says so and warns (flowrate.measure.freed_memory)."""

    # --- the timed loop ---
    preheat_steps: int = setting(
        5,
        help="Untimed warm-up steps.",
        flags=("--preheat",),
        bounds=Bounds("0 or more", 0, MAX_STEPS),
        unit="steps",
    )
    """Untimed warm-up steps before the clock starts."""
    steps: int | None = setting(
        None,
        help="Time exactly this many steps (overrides --duration and --min-steps).",
        bounds=STEPS,
        unit="steps",
    )
    """Exactly this many timed steps; None measures until both min_steps and duration_s are met."""
    min_steps: int = setting(10, help="Time at least this many steps.", bounds=STEPS, unit="steps")
    """Fewest timed steps when steps is None."""
    duration_s: float = setting(
        10.0, help="Time at least this many seconds.", flags=("--duration",), bounds=SECONDS, unit="s"
    )
    """Minimum timed duration in seconds (ignored when steps is set)."""
    sample_every: int | None = setting(
        None,
        help="Steps between sample points.",
        bounds=STEPS,
        unit="steps",
        default_help="enough for --target-interval",
    )
    """Steps between sample points; None picks enough for target_interval_s."""
    target_interval_s: float = setting(
        0.2,
        help="Seconds an interval should last when --sample-every is automatic.",
        flags=("--target-interval",),
        bounds=SECONDS,
        unit="s",
    )
    """The seconds an interval between sample points aims at when sample_every is None."""
    smoothing: float = setting(
        0.4,
        help="Rate's smoothing factor α.",
        bounds=Bounds("in [0, 1)", 0, 1, integer=False, high_open=True),
    )
    """Rate's smoothing factor α: Rate_k = (1 − α)·local_k + α·Rate_{k−1}."""

    # --- checkpoints and extra measurements ---
    checkpoint_every: int | None = setting(
        None,
        help="Save model and optimizer state every N timed steps (needs --checkpoint-dir); "
        "checkpoint time is reported apart.",
        bounds=STEPS,
        unit="steps",
    )
    """Save model and optimizer state every this many timed steps into checkpoint_dir; checkpoint
    time is recorded as its own kind of interval."""
    checkpoint_dir: str | None = setting(None, help="Where checkpoints go.", kind="folder")
    """Where checkpoints go; given together with checkpoint_every."""
    keep_checkpoints: int | None = setting(
        None,
        help="Keep only the newest N checkpoints, deleting older ones after each save.",
        bounds=COUNT,
        unit="checkpoints",
        default_help="all",
    )
    """Keep only the newest this many checkpoints in checkpoint_dir, deleting older ones after each
    save; None keeps them all."""
    measure_peak: bool = setting(
        False,
        help="First time a large GEMM at this precision: MFU is also given against that measured peak.",
    )
    """Before the run, time a large GEMM at the run's precision: MFU is then also reported against
    this measured peak."""

    # --- the dataset ---
    data_dir: str | None = setting(
        None,
        help="Read every step's batch from this dataset (`flowrate data make` / `data import-*`) "
        "instead of synthetic data; the result records the input-bound share.",
        flags=("--data",),
        kind="folder",
        metavar="DIR",
    )
    """A dataset folder (`flowrate data make` / `data import-*`) to read every step's batch from,
    instead of synthetic batches made on the device; the result records the input-bound share."""
    loader_workers: int = setting(
        2,
        help="--data: loader worker processes (0 reads in the training thread).",
        bounds=Bounds("an integer 0 or more", 0, 256),
        unit="processes",
    )
    """Loader worker processes reading the dataset (0: read in the training loop's own thread)."""
    prefetch: int = setting(
        2,
        help="--data: batches each loader worker keeps ready.",
        bounds=Bounds("a positive integer", 1, 1024),
        unit="batches",
    )
    """Batches each loader worker keeps ready ahead of the step."""
    shuffle_buffer: int = setting(
        4096,
        help="--data: records per shuffle window of the loader.",
        bounds=Bounds("a positive integer", 1, 10**8),
        unit="records",
    )
    """Records per shuffle window of the loader (indices only: it holds no data)."""

    # --- data-parallel runs ---
    dist_timeout_s: float = setting(
        300.0,
        help="Data-parallel runs: how long a rank waits for the others before the run stops with an error.",
        flags=("--dist-timeout",),
        bounds=SECONDS,
        unit="s",
        metavar="SECONDS",
    )
    """Seconds a collective may wait for the other ranks before the run stops with an error (a
    rank that died or hangs), and how long start-up waits for every rank."""

    # --- where the time and the money go (after the timed run; never part of its identity) ---
    profile_dir: str | None = profile_dir_setting()
    """A folder for the profile taken after the timed run (flowrate.harness.profiling): the Chrome
    trace, the operator table (JSON and CSV) and the step breakdown; None takes no profile."""
    price_per_hour: float | None = setting(
        None,
        help="What the machine costs per hour (your price): samples per dollar and dollars per "
        "million tokens.",
        bounds=POSITIVE,
        unit="$/h",
        metavar="DOLLARS",
        sweepable=False,
    )
    """The machine's price per hour, in the user's currency (flowrate.results.cost)."""
    energy_price_per_kwh: float | None = setting(
        None,
        help="What a kWh costs (your price): the measured energy's cost, added to --price-per-hour.",
        flags=("--energy-price",),
        bounds=POSITIVE,
        unit="$/kWh",
        metavar="DOLLARS",
        sweepable=False,
    )
    """The price of a kilowatt-hour, in the user's currency: prices the measured joules."""
    prices: str | None = setting(
        None,
        help="A TOML file of your prices per machine ([[machine]] entries: a fingerprint key such as "
        "device_name, and price_per_hour and/or energy_price_per_kwh); --price-per-hour and "
        "--energy-price win over it.",
        kind="text",
        metavar="FILE",
        sweepable=False,
    )
    """The user's prices file (flowrate.config.prices): the entry naming the machine that ran prices
    the run where --price-per-hour or --energy-price does not."""
    to_solution: str | None = setting(
        None,
        help="Project the wall time (and cost, at your prices) of a job of this size at the measured "
        "GlobalRate, e.g. 2e12tokens, 1e6samples or 3epochs (of the --data set).",
        kind="text",
        metavar="AMOUNT",
        sweepable=False,
    )
    """A job's size, a positive amount of tokens, samples or epochs of the --data set
    (flowrate.config.amount), whose wall time and cost the result projects at the measured rate
    (flowrate.results.solution)."""

    # --- as a record holds it (results.codec's open sections, no settings): keys beyond these, and
    # the record's key order (None: made here; one read from a record ran, so is not checked) ---
    extra: dict[str, object] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    written: tuple[str, ...] | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise parsed values in place
        if self.mode is not None:
            set_(self, "mode", Mode.parse(self.mode))
        set_(self, "precision", Precision.parse(self.precision))
        set_(self, "optimizer", OptimizerName.parse(self.optimizer))
        set_(self, "execution", Execution.parse(self.execution))
        set_(self, "freed_memory", FreedMemory.parse(self.freed_memory))
        if self.written is not None:
            return
        check_problem(self)
        set_(self, "batch_size", parse_batch_size(self.batch_size))
        for check in CHECKS:
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
        """The settings as plain values (the record's keys beyond them left out)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in RECORD_ONLY}
        data["problem_options"] = dict(self.problem_options)
        for key, value in data.items():
            if isinstance(value, enum.Enum):
                data[key] = value.value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        known = {f.name for f in dataclasses.fields(cls)} - RECORD_ONLY
        return cls(**{k: v for k, v in data.items() if k in known})


RECORD_ONLY = frozenset({"extra", "written"})  # a record's keys beside the settings (above)
CHECK_STEPS = 300  # steps a `flowrate check` trains when given no length (and explore's checks)


class _BoundsTable(Mapping[str, Bounds]):
    """RunConfig's numeric fields and their bounds, read from the fields' Settings as they are now."""

    def _table(self) -> dict[str, Bounds]:
        return {f.name: f.bounds for f in settings(RunConfig) if f.bounds is not None}

    def __getitem__(self, name: str) -> Bounds:
        return self._table()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


BOUNDS: Mapping[str, Bounds] = _BoundsTable()


def parse_batch_size(value: int | str | None, config: type = RunConfig) -> int | str | None:
    """A batch size as given ("16", 16, "AUTO", None) in its one spelling (16, "auto", None),
    within the bounds of ``config``'s batch_size."""
    if isinstance(value, str):
        try:
            value = to_batch(value)
        except BadValue:
            raise ConfigError("batch_size", f"must be a positive integer or 'auto', got {value!r}") from None
    setting_of(config, "batch_size").check(value)
    return value


# RunConfig fields whose flag is not simply the field's name with dashes, and the flag's name
FLAG_NAMES = {f.name: f.aliases[0] for f in settings(RunConfig) if f.aliases and f.setting.own_option}
