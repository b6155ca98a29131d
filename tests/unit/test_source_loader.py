"""The loader boundary of library models: late errors name the override or the file."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from flowrate.errors import ConfigError, FlowrateError
from flowrate.problems.sources import loader


def _make(overrides: Mapping[str, str]) -> str:
    """A builder that divides by ``heads`` and refuses a negative ``layers``, as a library would."""
    heads, layers = int(overrides.get("heads", "4")), int(overrides.get("layers", "2"))
    assert layers >= 0, "negative layers"
    return f"{64 // heads} x {layers}"


def test_a_lone_override_is_named_as_typed() -> None:
    with pytest.raises(ConfigError) as caught:
        loader.build("hf:toy", {"heads": "0"}, _make)
    assert caught.value.field == "--hf-config heads=0"
    assert (
        caught.value.message == "hf:toy cannot be built with this value: integer division or modulo by zero"
    )


def test_of_several_overrides_the_one_that_fails_alone_is_named() -> None:
    with pytest.raises(ConfigError) as caught:
        loader.build("hf:toy", {"heads": "2", "layers": "-1"}, _make)
    assert caught.value.field == "--hf-config layers=-1"


def test_the_source_is_named_when_it_fails_without_overrides(tmp_path: Path) -> None:
    source = tmp_path / "config.json"

    def make(overrides: Mapping[str, str]) -> str:
        raise ValueError("num_hidden_layers expected int\ngot 'abc'")

    with pytest.raises(FlowrateError) as caught:
        loader.build("hf:saved", {"heads": "2"}, make, source=source)
    assert not isinstance(caught.value, ConfigError)
    assert (
        str(caught.value)
        == f"{source}: hf:saved cannot be built from it: num_hidden_layers expected int got 'abc'"
    )


def test_without_user_values_the_error_is_flowrates_own_and_raised_again() -> None:
    with pytest.raises(ZeroDivisionError):
        loader.build("hf:toy", {}, lambda overrides: 1 // 0)


def test_success_and_flowrates_own_errors_pass_through() -> None:
    assert loader.build("hf:toy", {"heads": "8"}, _make) == "8 x 2"

    def refuse(overrides: Mapping[str, str]) -> str:
        raise ConfigError("seq_len", "too long")

    with pytest.raises(ConfigError, match="seq_len: too long"):
        loader.build("hf:toy", {"heads": "8"}, refuse)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (2**31, "at most 2147483647"),
        (float("nan"), "finite"),
        (float("inf"), "finite"),
        ((1, 2**40), "at most"),
    ],
)
def test_numbers_no_tensor_can_take_are_refused(value: object, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as caught:
        loader.checked_number("hidden_size", "X", value)
    assert caught.value.field == "--hf-config hidden_size=X"


def test_numbers_a_model_can_take_pass() -> None:
    assert loader.checked_number("eps", "1e-6", 1e-6) == 1e-6
    assert loader.constructor_value("depth", "-(2**31)") == "-(2**31)"  # not a literal: text
    assert loader.constructor_value("depth", "2") == 2 and loader.constructor_value("act", "gelu") == "gelu"


def _saved(folder: Path) -> nn.Module:
    model = nn.Linear(4, 3)
    folder.mkdir()
    save_file(model.state_dict(), str(folder / loader.SAFETENSORS))
    return model


def test_weights_of_the_configs_shapes_pass(tmp_path: Path) -> None:
    loader.check_weights(tmp_path / "m", _saved(tmp_path / "m"))
    loader.check_weights(tmp_path, nn.Linear(4, 3))  # no weights file: nothing to check


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda data: data[: len(data) // 2], "not a readable safetensors file"),
        (lambda data: struct.pack("<Q", 2**62) + data[8:], "header too large"),
        (lambda data: b"\x07" * 100, "not a readable safetensors file"),
    ],
)
def test_a_damaged_safetensors_file_is_named(tmp_path: Path, damage: object, says: str) -> None:
    model = _saved(tmp_path / "m")
    weights = tmp_path / "m" / loader.SAFETENSORS
    weights.write_bytes(damage(weights.read_bytes()))  # type: ignore[operator]
    with pytest.raises(FlowrateError, match=says) as caught:
        loader.check_weights(tmp_path / "m", model)
    assert str(caught.value).startswith(f"{weights}: ") and "\n" not in str(caught.value)


def test_weights_of_another_shape_are_named(tmp_path: Path) -> None:
    _saved(tmp_path / "m")
    with pytest.raises(
        FlowrateError, match=r"m/model\.safetensors: bias has shape \[3\] but the config gives \[5\]"
    ):
        loader.check_weights(tmp_path / "m", nn.Linear(4, 5))


def test_a_garbage_pickle_is_named(tmp_path: Path) -> None:
    (tmp_path / loader.PICKLE).write_bytes(b"\xef" * 64)
    with pytest.raises(FlowrateError, match=r"pytorch_model\.bin: not a readable PyTorch weights file"):
        loader.check_weights(tmp_path, nn.Linear(4, 3))
    torch.save(nn.Linear(4, 3).state_dict(), tmp_path / loader.PICKLE)
    loader.check_weights(tmp_path, nn.Linear(4, 3))


def test_a_failed_load_names_the_weights_file(tmp_path: Path) -> None:
    _saved(tmp_path / "m")
    with pytest.raises(FlowrateError) as caught, loader.reading_weights(tmp_path / "m"):
        raise RuntimeError("size mismatch\nfor weight")
    assert (
        str(caught.value)
        == f"{tmp_path / 'm' / loader.SAFETENSORS}: cannot be loaded (size mismatch for weight)"
    )


def test_an_empty_name_is_refused() -> None:
    with pytest.raises(ConfigError, match="hf: names no model"):
        loader.require_name("hf", " ", "llama")
