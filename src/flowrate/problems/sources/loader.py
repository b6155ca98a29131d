"""The one boundary every library model (hf:, timm:, torchvision:) is built and loaded through.

Libraries check many values late: a config class accepts ``num_attention_heads=0`` and the
model's constructor divides by it; a shape mismatch shows in the first forward; a damaged
weights file fails inside safetensors or torch.load. Here those failures become one line naming
what the user gave:

- ``build(spec, overrides, make)``: ``make(overrides)`` builds the problem (config, a meta-device
  model, a meta forward); a late error names the override to blame as typed
  (``--hf-config num_attention_heads=0``), or the folder's config.json when no override is;
- ``check_weights(folder, model)``: the weights file readable and its tensors' shapes the meta
  model's, read from the file's header (safetensors) or memory-mapped (.bin): nothing is loaded;
- ``reading_weights(folder)``: around the real load, a failure there names the file;
- ``checked_classes(count)``: a head of no classes builds, but no label can be drawn for it: it
  is refused while building, so the override that set it is named;
- ``describe_step_failure(error)``: an error a library model raises in its own code during the
  run (BatchNorm given a single value per channel by batch 1) is one line naming the library's
  file and line, as a user's problem file's failure is;
- ``checked_number(key, text, value)``: a value no tensor size or arithmetic can take (beyond
  2**31 - 1, NaN, infinite) is refused before anything is built.
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import sys
import traceback
import zipfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from flowrate.config import INT32_MAX
from flowrate.errors import ConfigError, FlowrateError

T = TypeVar("T")

# What a library raises when a value it accepted turns out unusable while the model is built.
LATE_ERRORS: tuple[type[Exception], ...] = (
    ValueError,
    ArithmeticError,
    TypeError,
    AssertionError,
    LookupError,
    RuntimeError,
)
# The weights files a save_pretrained folder may hold, in the order transformers reads them.
SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PICKLE = "pytorch_model.bin"
WEIGHT_FILES = (SAFETENSORS, SAFETENSORS_INDEX, PICKLE)
# The libraries whose model code may fail during a step.
LIBRARIES = ("timm", "torchvision", "transformers")
CAUSE_CHARS = 240  # the library's words kept in the one error line


def override_flag(key: str, text: str) -> str:
    """An override as the user typed it."""
    return f"--hf-config {key}={text}"


def require_name(prefix: str, name: str, example: str) -> None:
    """A prefix with nothing after its colon (``-p hf:``) is refused, naming what goes there."""
    if not name.strip():
        raise ConfigError(
            "problem", f"{prefix}: names no model: give one after the colon, e.g. {prefix}:{example}"
        )


def build(
    spec: str,
    overrides: Mapping[str, str],
    make: Callable[[Mapping[str, str]], T],
    *,
    source: Path | None = None,
    errors: tuple[type[Exception], ...] = (),
) -> T:
    """``make(overrides)``, a late error of the library (LATE_ERRORS or ``errors``) said as the
    override to blame, or ``source`` (the file the other values come from) when none is; with
    neither, the error is flowrate's own and is raised again."""
    caught = LATE_ERRORS + errors
    try:
        return make(overrides)
    except FlowrateError:
        raise
    except caught as error:
        culprits = _culprits(overrides, make, caught, source is not None)
        cause = describe(error)
        if culprits:
            typed = " ".join(override_flag(key, overrides[key]) for key in culprits)
            raise ConfigError(typed, f"{spec} cannot be built with this value: {cause}") from None
        if source is not None:
            raise FlowrateError(f"{source}: {spec} cannot be built from it: {cause}") from None
        raise


def _culprits(
    overrides: Mapping[str, str],
    make: Callable[[Mapping[str, str]], Any],
    caught: tuple[type[Exception], ...],
    has_source: bool,
) -> list[str]:
    """The overrides to blame: none when the source's values fail without any; the only one; each
    that fails alone; else all of them together."""
    if has_source and _fails(make, {}, caught):
        return []
    if len(overrides) <= 1:
        return list(overrides)
    alone = [key for key in overrides if _fails(make, {key: overrides[key]}, caught)]
    return alone or list(overrides)


def _fails(
    make: Callable[[Mapping[str, str]], Any],
    overrides: Mapping[str, str],
    caught: tuple[type[Exception], ...],
) -> bool:
    failures: tuple[type[Exception], ...] = (FlowrateError, *caught)
    try:
        make(overrides)
    except failures:
        return True
    return False


def describe(error: BaseException) -> str:
    """The library's message on one line (a validation error's detail is on its later lines)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = " ".join(lines) or type(error).__name__
    return text if len(text) <= CAUSE_CHARS else text[: CAUSE_CHARS - 1] + "…"


def describe_step_failure(error: BaseException) -> str | None:
    """One line for ``error`` raised in a library model's own code while the run stepped it (its
    file and line, relative to the library); None when no frame of its traceback is in one of
    LIBRARIES, or ``error`` is not an error a library raises late."""
    if not isinstance(error, LATE_ERRORS):
        return None
    roots = [
        (name, str(Path(module.__file__).parent) + "/")
        for name in LIBRARIES
        if (module := sys.modules.get(name)) is not None and module.__file__
    ]
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        for name, root in roots:
            if frame.filename.startswith(root):
                where = f"{name}/{frame.filename[len(root) :]}:{frame.lineno}"
                what = f"{type(error).__name__}: {describe(error)}"
                return f"the {name} model failed during the run: {what} ({where})"
    return None


def checked_number(key: str, text: str, value: Any) -> Any:
    """``value`` (``text`` read as a number, or anything else) when a model can be built with it;
    an integer beyond 2**31 - 1 (a tensor size past any kernel's), NaN or an infinity refused."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) > INT32_MAX:
        raise ConfigError(override_flag(key, text), f"must be at most {INT32_MAX} (2**31 - 1) in size")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(override_flag(key, text), "must be a finite number")
    if isinstance(value, tuple | list):
        for item in value:
            checked_number(key, text, item)
    return value


def checked_classes(count: int, least: int = 1) -> int:
    """``count``, a model's number of classes, when a label can be drawn for it (``least``: the
    fewest the task's labels need); else a ValueError, which ``build`` blames on the override."""
    if count < least:
        raise ValueError(
            f"the model needs {least} class{'es' if least > 1 else ''} or more to label, got {count}"
        )
    return count


def constructor_value(key: str, text: str) -> Any:
    """A constructor keyword's value (timm, torchvision): a Python literal (2, 0.1, True, (1, 2))
    within checked_number's bounds, or else the text itself."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text
    return checked_number(key, text, value)


# --- weights ----------------------------------------------------------------------------------


def weight_file(folder: Path) -> Path | None:
    """The weights file transformers reads from ``folder`` (None: it has none)."""
    return next((folder / name for name in WEIGHT_FILES if (folder / name).is_file()), None)


def check_weights(folder: Path, model: Any) -> None:
    """The folder's weights readable, each tensor of the shape ``model`` (a meta copy built from
    the config) has under the same name; read from headers and memory maps, nothing loaded."""
    file = weight_file(folder)
    if file is None:
        return
    expected = {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}
    for name, shape in _stored_shapes(file).items():
        if name in expected and expected[name] != shape:
            raise FlowrateError(
                f"{file}: {name} has shape {list(shape)} but the config gives {list(expected[name])}: "
                "these weights were saved for another configuration"
            )


def _stored_shapes(file: Path) -> dict[str, tuple[int, ...]]:
    if file.name == SAFETENSORS_INDEX:
        shapes: dict[str, tuple[int, ...]] = {}
        for shard in _shards(file):
            shapes.update(_stored_shapes(shard))
        return shapes
    if file.name == PICKLE:
        return _pickle_shapes(file)
    return _safetensors_shapes(file)


def _safetensors_shapes(file: Path) -> dict[str, tuple[int, ...]]:
    from safetensors import safe_open

    try:
        with safe_open(str(file), framework="pt") as opened:
            return {name: tuple(opened.get_slice(name).get_shape()) for name in opened.keys()}  # noqa: SIM118
    except OSError:
        raise
    except Exception as error:  # safetensors raises its own SafetensorError, and others
        raise FlowrateError(f"{file}: not a readable safetensors file ({describe(error)})") from None


def _pickle_shapes(file: Path) -> dict[str, tuple[int, ...]]:
    import torch

    try:  # memory-mapped where it can be (torch.save's zip format): no tensor is read
        state = torch.load(file, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(file))
    except OSError:
        raise
    except Exception as error:  # UnpicklingError, RuntimeError, EOFError, …: not a state dict
        raise FlowrateError(f"{file}: not a readable PyTorch weights file ({_unpickling(error)})") from None
    if not isinstance(state, dict):
        raise FlowrateError(f"{file}: holds a {type(state).__name__}, not a state dict of tensors")
    return {name: tuple(t.shape) for name, t in state.items() if isinstance(t, torch.Tensor)}


def _unpickling(error: Exception) -> str:
    """torch.load's reason: the unpickler's own line of a weights-only failure, which is wrapped
    in advice about ``weights_only`` that does not apply to a damaged file."""
    _, marker, reason = str(error).partition("Unpickler error:")
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    return lines[0] if marker and lines else describe(error)


def _shards(index: Path) -> list[Path]:
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
        names = sorted(set(weight_map.values()))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise FlowrateError(f"{index}: not a safetensors index ({describe(error)})") from None
    missing = [name for name in names if not (index.parent / name).is_file()]
    if missing:
        raise FlowrateError(f"{index}: names {missing[0]}, which is not in {index.parent}")
    return [index.parent / name for name in names]


@contextlib.contextmanager
def reading_weights(folder: Path) -> Iterator[None]:
    """Around loading ``folder``'s weights: a failure of the load names the weights file."""
    import torch

    try:
        yield
    except (FlowrateError, OSError, MemoryError, torch.OutOfMemoryError):
        raise
    except Exception as error:  # the load's own errors: safetensors', torch.load's, a size mismatch
        file = weight_file(folder) or folder
        raise FlowrateError(f"{file}: cannot be loaded ({describe(error)})") from None
