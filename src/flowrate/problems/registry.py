"""Finding problems: the zoo by name (with close-name suggestions) and users' own files."""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowrate.errors import ConfigError, FlowrateError
from flowrate.problems import encoder, kernels, mlp, resnet, transformer
from flowrate.problems.base import Family, Problem

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


_REQUIRED = (
    "build_model",
    "make_batch",
    "loss",
    "parameter_count",
    "forward_flops_per_sample",
)


def load_user_problem(spec: str) -> Problem:
    """Import PATH.py and call FACTORY() to get a Problem."""
    path_text, sep, factory_name = spec.rpartition(":")
    if not sep or not path_text or not factory_name:
        raise ConfigError(
            "problem",
            f"user problems are given as PATH.py:FACTORY, e.g. my_model.py:make_problem (got {spec!r})",
        )
    path = Path(path_text)
    if path.suffix != ".py":
        raise ConfigError("problem", f"{path_text!r} is not a .py file; give PATH.py:FACTORY")
    if not path.is_file():
        raise ConfigError("problem", f"no such file {path_text!r}")
    if not factory_name.isidentifier():
        raise ConfigError("problem", f"{factory_name!r} is not a Python name; give PATH.py:FACTORY")
    module_name = f"flowrate_user_{path.stem}_{abs(hash(path.resolve()))}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise FlowrateError(f"cannot import {path_text!r} as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    folder = str(path.resolve().parent)
    if folder not in sys.path:  # let the user's file import its neighbours, as a script would
        sys.path.insert(0, folder)
    try:
        module_spec.loader.exec_module(module)
    except Exception as error:
        raise FlowrateError(f"importing {path_text} failed: {_describe(error)}") from error
    factory = getattr(module, factory_name, None)
    if factory is None:
        found = [
            name
            for name, value in vars(module).items()
            if callable(value)
            and not name.startswith("_")
            and getattr(value, "__module__", None) == module_name
        ]
        hint = f"; callables there: {', '.join(found)}" if found else ""
        raise ConfigError("problem", f"{path_text} defines no {factory_name!r}{hint}")
    if not callable(factory):
        raise ConfigError("problem", f"{path_text}:{factory_name} is not callable")
    try:
        problem = factory()
    except Exception as error:
        raise FlowrateError(f"{path_text}:{factory_name}() failed: {_describe(error)}") from error
    if not isinstance(problem, Problem):
        missing = [m for m in _REQUIRED if not callable(getattr(problem, m, None))]
        detail = f" (missing: {', '.join(missing)})" if missing else ""
        raise ConfigError(
            "problem",
            f"{path_text}:{factory_name}() returned {type(problem).__name__}, not a flowrate.Problem"
            f"{detail}; subclass flowrate.Problem",
        )
    return problem


def _describe(error: BaseException) -> str:
    """'ValueError: bad (my_model.py:12)': the error and the user's line that raised it."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


def sample_shape_field(problem: str) -> str:
    """The shape option --sample-shape sets for this zoo problem (seq_len or image_size)."""
    if is_user_problem(problem):
        raise ConfigError("sample_shape", "applies to zoo problems only; a user problem sets its own shapes")
    family, _size = resolve_family(problem)
    if family.sample_shape_option is None:
        raise ConfigError("sample_shape", f"{family.name} has no sample shape to set")
    return family.sample_shape_option
