"""RunConfig's validation, one concern at a time: each check names the field and says what would be
valid. RunConfig runs them at construction (the problem first, then the batch size's spelling,
then these in field order)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from flowrate.choices import Execution, Mode, Precision
from flowrate.config.amount import EPOCHS, parse_amount
from flowrate.config.bounds import OPTION_BOUNDS
from flowrate.config.setting import settings
from flowrate.config.values import AUTO
from flowrate.errors import ConfigError


class Checked(Protocol):
    """What the checks read of a RunConfig (it is defined above them: flowrate.config.run)."""

    @property
    def problem(self) -> str: ...
    @property
    def problem_options(self) -> dict[str, int | str]: ...
    @property
    def mode(self) -> Mode | None: ...
    @property
    def batch_size(self) -> int | str | None: ...
    @property
    def global_batch_size(self) -> int | None: ...
    @property
    def precision(self) -> Precision: ...
    @property
    def execution(self) -> Execution: ...
    @property
    def recompute(self) -> bool: ...
    @property
    def resident_blocks(self) -> int | None: ...
    @property
    def compile(self) -> bool: ...
    @property
    def device(self) -> str: ...
    @property
    def checkpoint_every(self) -> int | None: ...
    @property
    def checkpoint_dir(self) -> str | None: ...
    @property
    def keep_checkpoints(self) -> int | None: ...
    @property
    def data_dir(self) -> str | None: ...
    @property
    def profile_dir(self) -> str | None: ...
    @property
    def to_solution(self) -> str | None: ...


def check_problem(config: Checked) -> None:
    if not config.problem or not isinstance(config.problem, str):
        raise ConfigError("problem", "name a zoo problem (see `flowrate list`) or PATH.py:FACTORY")
    for key, value in config.problem_options.items():
        if not isinstance(value, str):
            OPTION_BOUNDS.check(key, value)


def check_numbers(config: Checked) -> None:
    """Every numeric field within its Setting's bounds (None: the field is unset, or takes a default)."""
    for found in settings(type(config)):
        if found.name != "batch_size":  # checked with its spelling, "auto"
            found.check(getattr(config, found.name))


def check_batch(config: Checked) -> None:
    if config.global_batch_size is not None and config.batch_size is not None:
        raise ConfigError("global_batch_size", "give it or --batch-size (per rank), not both")


def check_execution(config: Checked) -> None:
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


def check_device(config: Checked) -> None:
    device = config.device
    if device in (AUTO, "cpu", "cuda"):
        return
    prefix, _, index = device.partition(":")
    if prefix == "cuda" and index.isdigit():
        return
    raise ConfigError("device", f"unknown device {device!r}; use auto, cpu, cuda or cuda:N")


def check_checkpoints(config: Checked) -> None:
    if (config.checkpoint_every is None) != (config.checkpoint_dir is None):
        missing = "checkpoint_dir" if config.checkpoint_dir is None else "checkpoint_every"
        raise ConfigError(missing, "--checkpoint-every and --checkpoint-dir go together; give both")
    if config.keep_checkpoints is not None and config.checkpoint_dir is None:
        raise ConfigError("keep_checkpoints", "applies with --checkpoint-every and --checkpoint-dir only")


def check_loader(config: Checked) -> None:
    """The loader's settings are left at their defaults without a dataset."""
    if config.data_dir is None:
        for name in ("loader_workers", "prefetch", "shuffle_buffer"):
            if getattr(config, name) != _default(config, name):
                raise ConfigError(name, "applies with --data DIR only (synthetic batches need no loader)")


def check_profile(config: Checked) -> None:
    """--profile steps the run's executor again after the timed loop (a resident one only);
    --to-solution's amount reads as one, and epochs count a --data set's samples."""
    if config.profile_dir is not None and config.execution is not Execution.RESIDENT:
        raise ConfigError("profile_dir", "applies to --execution resident only")
    if config.to_solution is not None:
        _, unit = parse_amount("to_solution", config.to_solution)
        if unit == EPOCHS and config.data_dir is None:
            why = "epochs count the samples of a --data set: give --data DIR, or tokens or samples"
            raise ConfigError("to_solution", why)


# in field order, after the problem and the batch size's spelling (the batch checks read it)
CHECKS: tuple[Callable[[Checked], None], ...] = (
    check_numbers,
    check_batch,
    check_execution,
    check_device,
    check_checkpoints,
    check_loader,
    check_profile,
)


def _default(config: Checked, name: str) -> object:
    return next(f.default for f in settings(type(config)) if f.name == name)
