"""Users' own problem files: loaded as the user's code, watched where flowrate calls into them.

``load_user_problem("my_model.py:make_problem")`` imports the file and calls the factory. Whatever
goes wrong there is the user's input: one line naming their file and line (a SyntaxError points
at the user's line, not at importlib; a ``sys.exit()`` at import is a mistake, never a pass).

Later, during the run, the problem's answers are checked where flowrate receives them (a loss
that is no scalar tensor, a build_model that returns no module), and ``describe_failure`` turns
an exception raised inside the user's file into one line naming its file, line and function:
the CLI's boundary asks it about every exception that is not flowrate's own.
"""

from __future__ import annotations

import importlib.util
import numbers
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import nn

from flowrate.errors import ConfigError, FlowrateError, UserCodeError
from flowrate.problems.base import Problem

# The problem files loaded in this process (absolute paths, as their code objects name them).
USER_FILES: set[str] = set()

_REQUIRED = (
    "build_model",
    "make_batch",
    "loss",
    "parameter_count",
    "forward_flops_per_sample",
)


def load_user_problem(spec: str) -> Problem:
    """Import PATH.py and call FACTORY() to get a Problem, its answers checked as the run uses them."""
    path, factory_name = _parse_spec(spec)
    module = _import(path)
    factory = getattr(module, factory_name, None)
    if factory is None:
        found = [
            name
            for name, value in vars(module).items()
            if callable(value)
            and not name.startswith("_")
            and getattr(value, "__module__", None) == module.__name__
        ]
        hint = f"; callables there: {', '.join(found)}" if found else ""
        raise ConfigError("problem", f"{path} defines no {factory_name!r}{hint}")
    if not callable(factory):
        raise ConfigError("problem", f"{path}:{factory_name} is not callable")
    problem = _call_factory(factory, f"{path}:{factory_name}()")
    if not isinstance(problem, Problem):
        missing = [m for m in _REQUIRED if not callable(getattr(problem, m, None))]
        detail = f" (missing: {', '.join(missing)})" if missing else ""
        raise ConfigError(
            "problem",
            f"{path}:{factory_name}() returned {type(problem).__name__}, not a flowrate.Problem"
            f"{detail}; subclass flowrate.Problem",
        )
    _watch(problem, path.name)
    return problem


def _parse_spec(spec: str) -> tuple[Path, str]:
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
    return path, factory_name


def _import(path: Path) -> ModuleType:
    """The user's file, run as a module; any failure (even sys.exit) is one line naming its line."""
    absolute = path.resolve()
    module_name = f"flowrate_user_{path.stem}_{abs(hash(absolute))}"
    module_spec = importlib.util.spec_from_file_location(module_name, absolute)
    if module_spec is None or module_spec.loader is None:
        raise FlowrateError(f"cannot import {path} as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    USER_FILES.add(str(absolute))
    folder = str(absolute.parent)
    if folder not in sys.path:  # let the user's file import its neighbours, as a script would
        sys.path.insert(0, folder)
    try:
        module_spec.loader.exec_module(module)
    except OSError as error:
        raise FlowrateError(f"cannot read {path}: {error.strerror or error}") from None
    except SyntaxError as error:
        where = f" ({Path(error.filename).name}:{error.lineno})" if error.filename else ""
        raise FlowrateError(f"importing {path} failed: SyntaxError: {error.msg}{where}") from None
    except SystemExit as error:
        raise FlowrateError(
            f"{path} called sys.exit({error.code!r}) while flowrate imported it{_where(error)}; "
            "a problem file must define the problem, not run it"
        ) from None
    except Exception as error:
        raise FlowrateError(f"importing {path} failed: {_what(error)}{_where(error)}") from None
    return module


def _call_factory(factory: Callable[[], Any], call: str) -> Any:
    try:
        return factory()
    except SystemExit as error:
        raise FlowrateError(f"{call} called sys.exit({error.code!r}){_where(error)}") from None
    except Exception as error:
        raise FlowrateError(f"{call} failed: {_what(error)}{_where(error)}") from None


# --- during the run -----------------------------------------------------------------------------


def describe_failure(error: BaseException) -> str | None:
    """One line for an exception (or a sys.exit) raised in a user's problem file during the run,
    naming the function, file and line; None when no frame of its traceback is in a user's file."""
    frame = _last_user_frame(error)
    if frame is None:
        return None
    where = f"({Path(frame.filename).name}:{frame.lineno})"
    if isinstance(error, SystemExit):
        return (
            f"{frame.name}() called sys.exit({error.code!r}) during the run {where}; a problem "
            "reports a failure by raising an exception"
        )
    return f"{frame.name}() failed: {_what(error)} {where}"


def _last_user_frame(error: BaseException) -> traceback.FrameSummary | None:
    frames = traceback.extract_tb(error.__traceback__)
    return next((f for f in reversed(frames) if f.filename in USER_FILES), None)


def _where(error: BaseException) -> str:
    frame = _last_user_frame(error)
    return f" ({Path(frame.filename).name}:{frame.lineno})" if frame is not None else ""


def _what(error: BaseException) -> str:
    """'ValueError: bad value', on one line (a multi-line message is joined)."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


# What flowrate needs back from each method it calls, checked as it arrives.
def _module(value: object) -> str | None:
    return None if isinstance(value, nn.Module) else "must return a torch.nn.Module"


def _scalar(value: object) -> str | None:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return None
    return "must return the loss as a scalar tensor (e.g. the mean over the batch)"


def _count(value: object) -> str | None:
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 0
    return None if ok else "must return the number of trainable parameters, an integer"


def _modules(value: object) -> str | None:
    ok = isinstance(value, list | tuple | nn.ModuleList | nn.Sequential) and all(
        isinstance(v, nn.Module) for v in value
    )
    return None if ok else "must return a list of the model's blocks (torch.nn.Module each)"


_CONTRACT: dict[str, Callable[[object], str | None]] = {
    "build_model": _module,
    "loss": _scalar,
    "parameter_count": _count,
    "blocks": _modules,
}


def _watch(problem: Problem, file: str) -> None:
    """Check each answer of the user's problem as flowrate receives it (for this instance only:
    its own methods stay as written, and the zoo's problems are not wrapped)."""
    for name, check in _CONTRACT.items():
        setattr(problem, name, _checked(getattr(problem, name), f"{file}: {name}()", check))


def _checked(
    method: Callable[..., Any], call: str, check: Callable[[object], str | None]
) -> Callable[..., Any]:
    def call_and_check(*args: Any, **kwargs: Any) -> Any:
        value = method(*args, **kwargs)
        wrong = check(value)
        if wrong is not None:
            raise UserCodeError(f"{call} {wrong}, not {_shown(value)}")
        return value

    return call_and_check


def _shown(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if value is None:
        return "None"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:39] + '…'}"
