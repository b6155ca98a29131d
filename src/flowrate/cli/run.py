"""`flowrate run`: benchmark one configuration and report it.

Parses flags into a RunConfig (whose defaults are the only defaults), calls the library, and
displays: the summary on stderr, the JSON result on stdout with --json or in a file with --out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from typing import TYPE_CHECKING, Any

import click

from flowrate.config import FLAG_NAMES, Execution, Mode, OptimizerName, Precision, RunConfig

if TYPE_CHECKING:
    from flowrate.problems.base import Problem
    from flowrate.results.schema import Result
    from flowrate.results.store import Store

_DEFAULTS = {f.name: f.default for f in fields(RunConfig) if f.default is not MISSING}
_SHAPE_OPTIONS = ("seq_len", "image_size", "layers", "heads", "hidden", "vocab_size")


def _default(name: str) -> str:
    return f" [default: {_DEFAULTS[name]}]"


_RUN_OPTIONS = [
    click.option(
        "-p",
        "--problem",
        help="Zoo problem (see `flowrate list`) or PATH.py:FACTORY." + _default("problem"),
    ),
    click.option(
        "--size",
        help="Named size of the problem family, e.g. debug or gpt2-medium. [default: the family's]",
    ),
    click.option(
        "--mode",
        type=click.Choice([m.value for m in Mode] + ["training", "inference"], case_sensitive=False),
        help="train: forward, backward, optimizer step; infer: forward only. "
        "[default: train; infer for kernels]",
    ),
    click.option(
        "-b",
        "--batch-size",
        help="Samples per step, or 'auto' to halve from --max-batch-size "
        "until a step fits in memory. [default: the problem's]",
    ),
    click.option(
        "--max-batch-size",
        type=int,
        help="Where --batch-size auto starts." + _default("max_batch_size"),
    ),
    click.option(
        "--global-batch-size",
        type=int,
        help="Data-parallel runs (torchrun): samples per step over all ranks, split evenly; "
        "instead of --batch-size, which is per rank.",
    ),
    click.option("--seq-len", type=int, help="Sequence length of token problems."),
    click.option("--image-size", type=int, help="Image side of image problems."),
    click.option(
        "--sample-shape", type=int, help="Seed 003's name: sequence length or image side, per problem."
    ),
    click.option("--layers", type=int, help="Transformer layers."),
    click.option("--heads", type=int, help="Attention heads."),
    click.option("--hidden", type=int, help="Hidden size."),
    click.option("--vocab-size", type=int, help="Vocabulary size."),
    click.option(
        "--precision",
        type=click.Choice([p.value for p in Precision], case_sensitive=False),
        help="fp32, tf32 (CUDA), bf16 / fp16 autocast (fp16 with loss scaling), pure-bf16."
        + _default("precision"),
    ),
    click.option(
        "--optimizer",
        type=click.Choice([o.value for o in OptimizerName], case_sensitive=False),
        help="Optimizer of training steps." + _default("optimizer"),
    ),
    click.option("--lr", "learning_rate", type=float, help="Learning rate." + _default("learning_rate")),
    click.option(
        "--execution",
        type=click.Choice([e.value for e in Execution], case_sensitive=False),
        help="Where the weights live: resident on the device, or streaming (weights and optimizer "
        "in host memory, streamed to the device one block at a time)." + _default("execution"),
    ),
    click.option(
        "--recompute",
        is_flag=True,
        default=None,
        help="Streaming: recompute each block's activations in backward instead of keeping them.",
    ),
    click.option(
        "--clip-grad-norm",
        type=float,
        help="Clip the global gradient norm to this value before each optimizer step.",
    ),
    click.option(
        "--compile",
        is_flag=True,
        default=None,
        help="Compile the step with torch.compile, reusing what `flowrate compile` cached for this "
        "configuration (the compile time and cache hit are recorded).",
    ),
    click.option(
        "--device-memory-limit",
        "device_memory_limit_gib",
        type=float,
        metavar="GIB",
        help="CUDA: cap this process's device memory (a per-process fraction), e.g. to prove a "
        "streamed model fits in 16 GiB.",
    ),
    click.option(
        "--device", help="auto (cuda when present, else cpu), cpu, cuda or cuda:N." + _default("device")
    ),
    click.option("--seed", type=int, help="Seed of weights and synthetic data." + _default("seed")),
    click.option(
        "--threads",
        type=int,
        help="CPU threads for PyTorch (torch.set_num_threads). [default: PyTorch's]",
    ),
    click.option(
        "--preheat",
        "preheat_steps",
        type=int,
        help="Untimed warm-up steps." + _default("preheat_steps"),
    ),
    click.option(
        "--steps", type=int, help="Time exactly this many steps (overrides --duration and --min-steps)."
    ),
    click.option("--min-steps", type=int, help="Time at least this many steps." + _default("min_steps")),
    click.option(
        "--duration",
        "duration_s",
        type=float,
        help="Time at least this many seconds." + _default("duration_s"),
    ),
    click.option(
        "--sample-every",
        type=int,
        help="Steps between sample points. [default: enough for --target-interval]",
    ),
    click.option(
        "--target-interval",
        "target_interval_s",
        type=float,
        help="Seconds an interval should last when --sample-every is automatic."
        + _default("target_interval_s"),
    ),
    click.option("--smoothing", type=float, help="Rate's smoothing factor α." + _default("smoothing")),
    click.option(
        "--checkpoint-every",
        type=int,
        help="Save model and optimizer state every N timed steps (needs --checkpoint-dir); "
        "checkpoint time is reported apart.",
    ),
    click.option("--checkpoint-dir", type=click.Path(file_okay=False), help="Where checkpoints go."),
    click.option(
        "--measure-peak",
        is_flag=True,
        help="First time a large GEMM at this precision: MFU is also given against that measured peak.",
    ),
    click.option(
        "--data",
        "data_dir",
        type=click.Path(file_okay=False),
        metavar="DIR",
        help="Read every step's batch from this dataset (`flowrate data make` / `data import-*`) "
        "instead of synthetic data; the result records the input-bound share.",
    ),
    click.option(
        "--loader-workers",
        type=int,
        help="--data: loader worker processes (0 reads in the training thread)." + _default("loader_workers"),
    ),
    click.option(
        "--prefetch", type=int, help="--data: batches each loader worker keeps ready." + _default("prefetch")
    ),
    click.option(
        "--shuffle-buffer",
        type=int,
        help="--data: records per shuffle window of the loader." + _default("shuffle_buffer"),
    ),
    click.option(
        "--dist-timeout",
        "dist_timeout_s",
        type=float,
        metavar="SECONDS",
        help="Data-parallel runs: how long a rank waits for the others before the run stops with "
        "an error." + _default("dist_timeout_s"),
    ),
    click.option(
        "-O",
        "--option",
        "extra_options",
        multiple=True,
        metavar="KEY=VALUE",
        help="Any shape option of the problem, e.g. -O m=4096 for gemm (see `flowrate list`).",
    ),
]


def run_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """The options that define a run, shared by `flowrate run` and `flowrate check`."""
    for option in reversed(_RUN_OPTIONS):
        function = option(function)
    return function


def output_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """--json, --out, --quiet and the store's --store, --tag, --no-store: where a result goes."""
    from flowrate.cli.select import STORE_HELP

    for option in reversed(
        [
            click.option(
                "--store", type=click.Path(dir_okay=False), help="Record the run in this store. " + STORE_HELP
            ),
            click.option(
                "-t",
                "--tag",
                "tags",
                multiple=True,
                help="Label the recorded run (repeatable), e.g. -t nightly.",
            ),
            click.option("--no-store", is_flag=True, help="Do not record the run in the results store."),
            click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON on stdout."),
            click.option(
                "-o", "--out", type=click.Path(dir_okay=False), help="Write the result as JSON to this file."
            ),
            click.option(
                "-q", "--quiet", is_flag=True, help="No summary or progress on stderr (warnings still show)."
            ),
        ]
    ):
        function = option(function)
    return function


@click.command("run")
@run_options
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=1,
    help="Run the benchmark N times, each in a fresh process, and combine them. [default: 1]",
)
@click.option(
    "--tensorboard",
    type=click.Path(file_okay=False),
    help="Write TensorBoard event files (Rate, GlobalRate, loss, MFU, power, memory) to this folder.",
)
@output_options
def command(
    repeat: int,
    tensorboard: str | None,
    store: str | None,
    tags: tuple[str, ...],
    no_store: bool,
    as_json: bool,
    out: str | None,
    quiet: bool,
    sample_shape: int | None,
    **flags: Any,
) -> None:
    """Benchmark one problem: train or infer, timed with Rate and GlobalRate.

    Under torchrun (`torchrun --nproc-per-node N -m flowrate run …`) the run is data-parallel:
    --batch-size is per rank, the throughput is the sum over ranks, and rank 0 alone prints,
    writes --out and records the run.
    """
    import sys

    from flowrate.cli import console
    from flowrate.cli.progress import LiveProgress
    from flowrate.cli.run_text import summary_rows
    from flowrate.execution.distributed import is_primary, launched
    from flowrate.harness.run import run_config
    from flowrate.units import count

    config, problem = resolve_run(
        flags, sample_shape, out, lambda c, p: c.for_problem(p.modes, p.default_mode, p.name)
    )
    launch = launched()
    if launch is not None and repeat > 1:
        from flowrate.errors import ConfigError

        raise ConfigError("repeat", "starts fresh processes, not ranks: repeat the torchrun launch instead")
    quiet = quiet or not is_primary()
    destination = Destination.open(store, tags, no_store, out, quiet, as_json)
    if launch is not None:
        console.status(
            f"data-parallel: {launch.world_size} ranks; live figures are rank 0's, the result sums them all",
            quiet,
        )
    console.status(
        f"flowrate: {problem.name}/{problem.size} ({count(problem.parameter_count())} parameters) "
        f"{config.mode} {config.precision.value}: {config.preheat_steps} preheat steps, "
        f"then timing at least {span(config)}",
        quiet,
    )
    if repeat > 1:
        result = _run_repeated(config, repeat, tensorboard, quiet)
    else:
        with LiveProgress(console.stderr_console(), config, enabled=not quiet) as progress:
            result = run_config(config, problem, argv=sys.argv, on_interval=progress, tensorboard=tensorboard)
    destination.report(result, f"flowrate run {result.run_id}", summary_rows(result))


@dataclass
class Destination:
    """Where a finished result goes: --out, the results store, the console, --json on stdout.

    The store is opened before the run, so a damaged or newer store is reported before any time
    is spent measuring; the run is recorded after the --out file is written.
    """

    store: Store | None
    tags: tuple[str, ...]
    out: str | None
    quiet: bool
    as_json: bool
    silent: bool = False  # a data-parallel rank other than 0: rank 0 reports the merged run

    @classmethod
    def open(
        cls,
        store: str | None,
        tags: tuple[str, ...],
        no_store: bool,
        out: str | None,
        quiet: bool,
        as_json: bool,
    ) -> Destination:
        from flowrate.errors import ConfigError
        from flowrate.execution.distributed import is_primary
        from flowrate.results.store import Store

        if no_store and (store or tags):
            raise ConfigError("no_store", "cannot be combined with --store or --tag")
        if not is_primary():
            return cls(None, (), None, True, False, silent=True)
        return cls(None if no_store else Store(store), tags, out, quiet, as_json)

    def report(self, result: Result, title: str, rows: list[tuple[str, str]]) -> None:
        """Save, record, show and print: the file first, so nothing measured is lost."""
        from flowrate.cli import console

        if self.silent:
            return
        if self.out:
            result.save(self.out)
            console.status(f"result written to {self.out}", self.quiet)
        if self.store is not None:
            with self.store:
                self.store.add(result, self.tags)
            tagged = f" tagged {', '.join(self.tags)}" if self.tags else ""
            console.status(f"recorded as run {result.run_id}{tagged} in {self.store.path}", self.quiet)
        if not self.quiet:
            console.key_value_table(title, rows)
        for warning in result.warnings:
            console.warn(warning)
        if self.as_json:
            console.data(result.to_json())


def _run_repeated(config: RunConfig, repeat: int, tensorboard: str | None, quiet: bool) -> Result:
    import sys

    from flowrate.campaigns.repeat import run_repeated
    from flowrate.cli import console
    from flowrate.units import rate

    def report(index: int, result: Result) -> None:
        s = result.summary
        console.status(
            f"run {index + 1}/{repeat}: median {rate(s.median_samples_per_sec)} samples/s, "
            f"GlobalRate {rate(s.samples_per_sec)}",
            quiet,
        )

    console.status(f"{repeat} runs, each in a fresh process", quiet)
    return run_repeated(config, repeat, argv=sys.argv, tensorboard=tensorboard, on_run=report)


def resolve_run(
    flags: dict[str, Any],
    sample_shape: int | None,
    out: str | None,
    settle: Callable[[RunConfig, Problem], RunConfig],
) -> tuple[RunConfig, Problem]:
    """The RunConfig and Problem the flags describe, settled for the command, before any work.

    A mistake names the flag the user typed, not the field behind it; an unwritable --out fails
    now, not after a long run.
    """
    from flowrate.errors import ConfigError
    from flowrate.problems.registry import get_problem

    try:
        config = _make_config(flags, sample_shape)
        problem = get_problem(config.problem, config.size, config.problem_options)
        config = settle(config, problem)
    except ConfigError as mistake:
        raise ConfigError(FLAG_NAMES.get(mistake.field, mistake.field), mistake.message) from None
    if out:
        _check_writable(out)
    return config, problem


def span(config: RunConfig) -> str:
    """How long the plan measures, in words."""
    return (
        f"{config.steps} steps" if config.steps else f"{config.min_steps} steps and {config.duration_s:g} s"
    )


def _check_writable(out: str) -> None:
    import os
    from pathlib import Path

    from flowrate.errors import ConfigError

    folder = Path(out).resolve().parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError("out", f"cannot create the folder {folder}: {error.strerror}") from None
    if not os.access(folder, os.W_OK):
        raise ConfigError("out", f"the folder {folder} is not writable; choose another --out")


def _make_config(flags: dict[str, Any], sample_shape: int | None) -> RunConfig:
    return RunConfig(**given_fields(flags, sample_shape))


def given_fields(flags: dict[str, Any], sample_shape: int | None) -> dict[str, Any]:
    """The RunConfig fields the run flags set (a flag left out is None), problem options gathered.

    `flowrate sweep` takes these as the base every point shares.
    """
    options = _parse_extra_options(flags.pop("extra_options", ()))
    options.update({k: v for k in _SHAPE_OPTIONS if (v := flags.pop(k)) is not None})
    given = {k: v for k, v in flags.items() if v is not None}
    if sample_shape is not None:
        from flowrate.problems.registry import sample_shape_field

        options[sample_shape_field(given.get("problem", _DEFAULTS["problem"]))] = sample_shape
    if options:
        given["problem_options"] = options
    return given


def _parse_extra_options(pairs: tuple[str, ...]) -> dict[str, int]:
    """-O key=value pairs as problem options; true/false are 1/0, dashes in keys are underscores."""
    from flowrate.errors import ConfigError

    options: dict[str, int] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ConfigError("option", f"expected KEY=VALUE, got {pair!r} (e.g. -O m=4096)")
        value = {"true": "1", "false": "0", "yes": "1", "no": "0"}.get(text.strip().lower(), text.strip())
        try:
            options[key] = int(value)
        except ValueError:
            raise ConfigError("option", f"{key} must be an integer, got {text!r}") from None
    return options
