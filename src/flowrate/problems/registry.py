"""Finding problems: the zoo by name (with close-name suggestions) and users' own files."""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from typing import Any

from flowrate.errors import ConfigError
from flowrate.problems import encoder, kernels, mlp, resnet, transformer
from flowrate.problems.base import Family, Problem
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


def is_user_problem(spec: str) -> bool:
    return ":" in spec or spec.endswith(".py")


def get_problem(spec: str, size: str | None = None, options: dict[str, int] | None = None) -> Problem:
    """Build the Problem a user named: a zoo name (family or size alias) or PATH.py:FACTORY."""
    options = options or {}
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
    if options:
        config = _apply_options(family, config, options)
    problem = family.build(config)
    problem.size = chosen if not options else f"{chosen}+custom"
    return problem


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


def _apply_options(family: Family, config: Any, options: dict[str, int]) -> Any:
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
    if is_user_problem(problem):
        raise ConfigError("sample_shape", "applies to zoo problems only; a user problem sets its own shapes")
    family, _size = resolve_family(problem)
    if family.sample_shape_option is None:
        raise ConfigError("sample_shape", f"{family.name} has no sample shape to set")
    return family.sample_shape_option
