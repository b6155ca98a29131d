"""From the run flags to a RunConfig and its Problem, before any work is done.

A mistake names the flag the user typed, not the field behind it (`-O nosuch`, `--sample-shape`);
an unwritable --out or --checkpoint-dir fails now, not after a long run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flowrate.cli.paths import check_folder, check_out
from flowrate.config import AUTO, FLAG_NAMES, RunConfig
from flowrate.config.values import BadValue, to_option_int
from flowrate.errors import ConfigError

if TYPE_CHECKING:
    from flowrate.problems.base import Problem

# the run flags that are problem options (RunConfig.problem_options), not RunConfig fields
_SHAPE_OPTIONS = ("seq_len", "image_size", "layers", "heads", "hidden", "vocab_size")


def settle_for_problem(config: RunConfig, problem: Problem) -> RunConfig:
    """The usual settling: the mode the problem takes (and its default when none was given)."""
    return config.for_problem(problem.modes, problem.default_mode, problem.name)


def resolve_run(
    flags: dict[str, Any],
    sample_shape: int | None,
    out: str | None = None,
    settle: Callable[[RunConfig, Problem], RunConfig] = settle_for_problem,
) -> tuple[RunConfig, Problem]:
    """The RunConfig and Problem the run flags describe, settled for the command; the paths the
    run will write are checked now, not after a long run."""
    from flowrate.problems.registry import get_problem

    check_max_batch_size(flags)
    typed = typed_names(flags, sample_shape)
    try:
        config = RunConfig(**given_fields(flags, sample_shape))
        problem = get_problem(config.problem, config.size, config.problem_options)
        config = settle(config, problem)
    except ConfigError as mistake:
        raise ConfigError(flag_of(mistake.field, typed), mistake.message) from None
    if out:
        check_out(out)
    if config.checkpoint_dir is not None:
        check_folder(config.checkpoint_dir, "checkpoint_dir")
    if config.profile_dir is not None:
        check_folder(config.profile_dir, "profile")
    if config.prices is not None:
        from flowrate.config.prices import read_prices

        read_prices(config.prices)  # a malformed prices file is refused before the model is built
    _warn_oversubscribed(config)
    return config, problem


def check_max_batch_size(flags: dict[str, Any]) -> None:
    """--max-batch-size is where --batch-size auto starts: given with any other batch size, it would
    change nothing, so it is refused."""
    if flags.get("max_batch_size") is not None and flags.get("batch_size") != AUTO:
        raise ConfigError("--max-batch-size", "applies with --batch-size auto only")


def _warn_oversubscribed(config: RunConfig) -> None:
    from flowrate.cli import console
    from flowrate.measure.inputs import usable_cores

    cores = usable_cores()
    if config.threads is not None and config.threads > cores:
        console.warn(
            f"--threads {config.threads} is more than this machine's {cores} cores: the threads take "
            f"turns on them, which is slower than --threads {cores} or fewer"
        )


def typed_names(flags: dict[str, Any], sample_shape: int | None) -> dict[str, str]:
    """The problem options set through another flag than their own, as the user typed it:
    `-O nosuch=3` is "-O nosuch", bert's --sample-shape is "--sample-shape", not --seq-len."""
    typed = {}
    for pair in flags.get("extra_options", ()):
        key = pair.partition("=")[0].strip().replace("-", "_")
        typed[key] = f"-O {key}"
    if sample_shape is not None:
        with contextlib.suppress(ConfigError):  # given_fields says why it has no sample shape
            from flowrate.problems.registry import sample_shape_field

            typed[sample_shape_field(flags.get("problem") or RunConfig.problem)] = "--sample-shape"
    return typed


def flag_of(field: str, typed: dict[str, str]) -> str:
    """The flag a ConfigError's field was given by: as typed, else the RunConfig field's flag."""
    return typed.get(field) or FLAG_NAMES.get(field, field)


def given_fields(flags: dict[str, Any], sample_shape: int | None) -> dict[str, Any]:
    """The RunConfig fields the run flags set (a flag left out is None), problem options gathered.

    `flowrate sweep` takes these as the base every point shares.
    """
    options: dict[str, int | str] = dict(parse_problem_options(flags.pop("extra_options", ())))
    options.update(parse_config_overrides(flags.pop("hf_config", ())))
    options.update({k: v for k in _SHAPE_OPTIONS if (v := flags.pop(k)) is not None})
    preset = flags.pop("preset", None)
    if preset is not None:  # a library model's preset is its size
        if flags.get("size") is not None:
            raise ConfigError("--preset", "names the size of an hf: model; give it or --size, not both")
        flags["size"] = preset
    given = {k: v for k, v in flags.items() if v is not None}
    if sample_shape is not None:
        from flowrate.problems.registry import sample_shape_field

        options[sample_shape_field(given.get("problem", RunConfig.problem))] = sample_shape
    if options:
        given["problem_options"] = options
    return given


def parse_config_overrides(pairs: tuple[str, ...]) -> dict[str, str]:
    """--hf-config key=value pairs, values kept as text: the model's config class types them."""
    overrides: dict[str, str] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                "--hf-config", f"expected KEY=VALUE, got {pair!r} (e.g. --hf-config num_hidden_layers=4)"
            )
        overrides[key.strip()] = text.strip()
    return overrides


def parse_problem_options(pairs: tuple[str, ...]) -> dict[str, int]:
    """-O key=value pairs as problem options; true/false are 1/0, dashes in keys are underscores."""
    options: dict[str, int] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ConfigError("option", f"expected KEY=VALUE, got {pair!r} (e.g. -O m=4096)")
        try:
            options[key] = to_option_int(text)
        except BadValue:
            raise ConfigError("option", f"{key} must be an integer, got {text!r}") from None
    return options
