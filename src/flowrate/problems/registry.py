"""Finding problems: the zoo by name (with close-name suggestions), models from libraries by
prefix (hf:, timm:, torchvision:; see problems/sources) and users' own files."""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flowrate.errors import ConfigError
from flowrate.problems import encoder, kernels, mlp, resnet, transformer
from flowrate.problems.base import Family, Problem
from flowrate.problems.sources.base import MissingExtra, SourceSettings
from flowrate.problems.user import load_user_problem

FAMILIES: dict[str, Family] = {
    family.name: family
    for module in (mlp, transformer, encoder, resnet, kernels)
    for family in module.FAMILIES
}

# Size names usable directly as problem names: `--problem gpt2` means transformer/gpt2.
_GENERIC_SIZES = {"debug", "default", "large", "xl"}
SIZE_ALIASES: dict[str, tuple[str, str]] = {
    size: (family.name, size)
    for family in FAMILIES.values()
    for size in family.sizes
    if size not in _GENERIC_SIZES and size not in FAMILIES
}


@dataclass(frozen=True)
class ProblemInfo:
    """One row of `flowrate list`."""

    family: str
    size: str
    is_default: bool
    parameters: int
    summary: str
    settings: dict[str, Any]


# prefix -> (the source module, the pip extra that installs its library)
SOURCES: dict[str, tuple[str, str]] = {
    "hf": ("flowrate.problems.sources.hf", "hf"),
    "timm": ("flowrate.problems.sources.timm_source", "timm"),
    "torchvision": ("flowrate.problems.sources.vision_source", "vision"),
}


def source_of(spec: str) -> str | None:
    """The library prefix a problem name starts with (hf:llama -> "hf"), or None."""
    prefix, sep, _ = spec.partition(":")
    return prefix.lower() if sep and prefix.lower() in SOURCES else None


def is_user_problem(spec: str) -> bool:
    return source_of(spec) is None and (":" in spec or spec.endswith(".py"))


def source_module(spec: str) -> Any:
    """The source module of a prefixed name, imported now; its library missing -> MissingExtra."""
    prefix = source_of(spec)
    if prefix is None:
        raise ConfigError("source", f"unknown source {spec!r}; use one of {', '.join(SOURCES)}")
    module_name, extra = SOURCES[prefix]
    try:
        return importlib.import_module(module_name)
    except ImportError as error:
        if (error.name or "").startswith("flowrate"):
            raise
        raise MissingExtra(spec, extra) from None


def get_problem(
    spec: str, size: str | None = None, options: Mapping[str, int | str] | None = None
) -> Problem:
    """Build the Problem a user named: a zoo name (family or size alias), a library model
    (hf:llama, timm:resnet50, …) or PATH.py:FACTORY."""
    options = options or {}
    if source_of(spec) is not None:
        return _source_problem(spec, size, options)
    if is_user_problem(spec):
        if size is not None or options:
            raise ConfigError("size", "sizes and shape options apply to zoo problems only")
        return load_user_problem(spec)
    family, alias_size = resolve_family(spec)
    if size is not None and alias_size is not None and size != alias_size:
        raise ConfigError("size", f"{spec!r} already names size {alias_size!r}; drop --size")
    chosen = size or alias_size or family.default_size
    if chosen not in family.sizes:
        raise ConfigError(
            "size",
            f"{family.name} has no size {chosen!r}{_suggest(chosen, family.sizes)}; "
            f"sizes: {', '.join(family.sizes)}",
        )
    config = family.sizes[chosen]
    for key, value in options.items():
        if not isinstance(value, int):  # --hf-config's raw strings
            raise ConfigError(
                "hf_config", f"applies to library models only (hf:…); {family.name} takes -O {key}=N"
            )
    if options:
        config = _apply_options(family, config, options)
    problem = family.build(config)
    problem.size = size_name(family.sizes, chosen, config)
    return problem


def size_name(sizes: Mapping[str, Any], chosen: str, config: Any) -> str:
    """The name of the size ``config`` is: ``chosen`` when the options left it as it was, the
    named size whose values it has exactly, else ``chosen+custom``."""
    if config == sizes[chosen]:
        return chosen
    return next((name for name, values in sizes.items() if values == config), f"{chosen}+custom")


def _source_problem(spec: str, size: str | None, options: Mapping[str, int | str]) -> Problem:
    """A library model: the shape flags it shares with the zoo, the rest its config's overrides;
    a named size is its preset."""
    rest = dict(options)
    shapes = {key: rest.pop(key, None) for key in ("seq_len", "image_size")}
    settings = SourceSettings(
        seq_len=_int_or_none(shapes["seq_len"]),
        image_size=_int_or_none(shapes["image_size"]),
        overrides={key: str(value) for key, value in rest.items()},
        preset=size,
    )
    return source_module(spec).build_problem(spec.partition(":")[2], settings)


def _int_or_none(value: int | str | None) -> int | None:
    try:
        return None if value is None else int(value)
    except ValueError:
        raise ConfigError(
            "hf_config", f"sequence length and image size are integers, got {value!r}"
        ) from None


def list_problems() -> list[ProblemInfo]:
    rows = []
    for family in FAMILIES.values():
        for size, config in family.sizes.items():
            problem = family.build(config)
            rows.append(
                ProblemInfo(
                    family=family.name,
                    size=size,
                    is_default=size == family.default_size,
                    parameters=problem.parameter_count(),
                    summary=family.summary,
                    settings=problem.describe(),
                )
            )
    return rows


def resolve_family(spec: str) -> tuple[Family, str | None]:
    """The zoo family a name means, and the size it names when it is a size alias (gpt2)."""
    key = spec.lower()
    if key in FAMILIES:
        return FAMILIES[key], None
    if key in SIZE_ALIASES:
        family_name, size = SIZE_ALIASES[key]
        return FAMILIES[family_name], size
    names = [*FAMILIES, *SIZE_ALIASES]
    raise ConfigError(
        "problem",
        f"unknown problem {spec!r}{_suggest(key, names)}; see `flowrate list`, "
        "or give your own as PATH.py:FACTORY",
    )


def _suggest(word: str, choices: Any) -> str:
    close = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.5)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def _apply_options(family: Family, config: Any, options: Mapping[str, int | str]) -> Any:
    for key in options:
        if key not in family.options:
            allowed = ", ".join(family.options) or "none"
            raise ConfigError(
                key, f"does not apply to {family.name} (its options: {allowed}; set one with -O KEY=VALUE)"
            )
    config = dataclasses.replace(config, **options)
    validate = getattr(config, "validate", None)
    if validate is not None:
        validate()
    return config


def sample_shape_field(problem: str) -> str:
    """The shape option --sample-shape sets for this zoo problem (seq_len or image_size)."""
    if source_of(problem) is not None:
        return getattr(source_module(problem), "sample_shape_option", lambda name: "image_size")(
            problem.partition(":")[2]
        )
    if is_user_problem(problem):
        raise ConfigError("sample_shape", "applies to zoo problems only; a user problem sets its own shapes")
    family, _size = resolve_family(problem)
    if family.sample_shape_option is None:
        raise ConfigError("sample_shape", f"{family.name} has no sample shape to set")
    return family.sample_shape_option
