"""Records from JSON and back: a typed record is built from the plain values a reader loaded.

A record is validated before it is decoded (flowrate.results.validate), so decoding only builds:
each field whose type is a dataclass (or an optional one, a list of them or a dict of them by
name) is decoded into it, an Enum field into its member, and every other value is kept exactly as
written — an integer stays an integer, so a record read and written again holds the numbers it
held. A key the record's type does not know is left out; flowrate.results.migrate brings every
earlier layout to this one first, so no key of a record flowrate wrote is lost.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def decode(cls: type[T], data: Mapping[str, Any]) -> T:
    """``data`` as a ``cls`` (a dataclass): known keys only, fields absent take their defaults."""
    values = {}
    for name, kind in _field_types(cls).items():  # type: ignore[arg-type]  # a class is hashable
        if name in data:
            values[name] = _value(kind, data[name])
    return cls(**values)


def encode(record: Any) -> dict[str, Any]:
    """A dataclass record as plain JSON values (Enum members as their values)."""
    return dataclasses.asdict(record, dict_factory=_plain)


def _plain(items: list[tuple[str, Any]]) -> dict[str, Any]:
    return {key: value.value if isinstance(value, enum.Enum) else value for key, value in items}


@functools.cache
def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _value(kind: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(kind)
    if origin is typing.Union or origin is types.UnionType:
        members = [k for k in typing.get_args(kind) if k is not type(None)]
        if len(members) == 1:
            return _value(members[0], value)
        return value
    if origin is list:
        (item,) = typing.get_args(kind)
        if dataclasses.is_dataclass(item) and isinstance(value, list):
            return [_value(item, v) for v in value]
        return value
    if origin is dict:
        _, item = typing.get_args(kind)
        if dataclasses.is_dataclass(item) and isinstance(value, Mapping):
            return {key: _value(item, v) for key, v in value.items()}
        return value
    if isinstance(kind, type):
        if dataclasses.is_dataclass(kind) and isinstance(value, Mapping):
            return decode(kind, value)
        if issubclass(kind, enum.Enum):
            return kind(value)
    return value
