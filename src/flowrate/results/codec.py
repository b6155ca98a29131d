"""Records from JSON and back: a typed record is built from the plain values a reader loaded.

A record is validated before it is decoded (flowrate.results.validate), so decoding only builds:
each field whose type is a dataclass (or an optional one, a list of them or a dict of them by
name) is decoded into it, an Enum field into its member, and every other value is kept exactly as
written — an integer stays an integer, so a record read and written again holds the numbers it
held. A key the record's type does not know is left out; flowrate.results.migrate brings every
earlier layout to this one first, so no key of a record flowrate wrote is lost.

An open section (a dataclass with the fields ``extra`` and ``written``: the environment, the
serving section, a record's configuration) is one whose keys vary by record: it names the keys
readers read and keeps every other key in ``extra``, and ``written`` holds the keys in the order
the record had them, so it is written again with the same keys in the same order. A named key
whose value is not what its type says (an object with the keys its type requires, an array of
such objects, one of an Enum's values) is kept in ``extra`` too, and its attribute reads as its
default. An open section built in code (``written`` None) writes every named key, then ``extra``.
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


EXTRA, WRITTEN = "extra", "written"  # the fields that make a section open (module docstring)


def decode(cls: type[T], data: Mapping[str, Any]) -> T:
    """``data`` as a ``cls`` (a dataclass): known keys only, fields absent take their defaults; an
    open section keeps the other keys in ``extra`` and their order in ``written``."""
    types_ = _field_types(cls)  # type: ignore[arg-type]  # a class is hashable
    if _is_open(cls):  # type: ignore[arg-type]
        return _decode_open(cls, types_, data)
    values = {}
    for name, kind in types_.items():
        if name in data:
            values[name] = _value(kind, data[name])
    return cls(**values)


def _decode_open(cls: type[T], types_: dict[str, Any], data: Mapping[str, Any]) -> T:
    values: dict[str, Any] = {}
    extra: dict[str, object] = {}
    for key, raw in data.items():
        kind = None if key in (EXTRA, WRITTEN) else types_.get(key)
        if kind is None or (raw is not None and not _fits(kind, raw)):
            extra[key] = raw
        else:
            values[key] = _value(kind, raw)
    return cls(**values, **{EXTRA: extra, WRITTEN: tuple(data)})


def encode(record: Any) -> dict[str, Any]:
    """A dataclass record as plain JSON values (Enum members as their values)."""
    out: dict[str, Any] = _plain(record)
    return out


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if _is_open(type(value)):
            return _plain_open(value)
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, Mapping):
        return {key: _plain(v) for key, v in value.items()}
    return value


def _plain_open(section: Any) -> dict[str, Any]:
    """An open section's keys in the order written: then a named field set since (not its
    default), then ``extra``'s keys; one built in code: every named field, then ``extra``."""
    named = {f.name: f for f in dataclasses.fields(section) if f.name not in (EXTRA, WRITTEN)}
    extra: Mapping[str, object] = getattr(section, EXTRA)
    written: tuple[str, ...] | None = getattr(section, WRITTEN)
    out: dict[str, Any] = {}
    for key in named if written is None else written:
        if key in extra:
            out[key] = _plain(extra[key])
        elif key in named:
            out[key] = _plain(getattr(section, key))
    for key, spec in named.items():
        if key not in out and getattr(section, key) != _default(spec):
            out[key] = _plain(getattr(section, key))
    for key, value in extra.items():
        if key not in out:
            out[key] = _plain(value)
    return out


def _default(spec: dataclasses.Field[Any]) -> Any:
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory()
    return spec.default


@functools.cache
def _is_open(cls: type) -> bool:
    names = {f.name for f in dataclasses.fields(cls)}
    return EXTRA in names and WRITTEN in names


def _fits(kind: Any, raw: Any) -> bool:
    """Whether ``raw`` is the JSON value a field of type ``kind`` holds, as far as decoding goes:
    an object with every required key for a dataclass, one of its values for an Enum, an object
    for a dict, an array for a list (of such objects for a list of dataclasses); anything for
    other types."""
    origin = typing.get_origin(kind)
    if origin is typing.Union or origin is types.UnionType:
        members = [k for k in typing.get_args(kind) if k is not type(None)]
        return len(members) != 1 or _fits(members[0], raw)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return isinstance(raw, Mapping) and _required(kind) <= raw.keys()
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return raw in {member.value for member in kind}
    if origin is dict:
        return isinstance(raw, Mapping)
    if origin is list:
        (item,) = typing.get_args(kind)
        return isinstance(raw, list) and (
            not dataclasses.is_dataclass(item) or all(_fits(item, v) for v in raw)
        )
    return True


@functools.cache
def _required(cls: type) -> frozenset[str]:
    """The fields a ``cls`` cannot be built without (no default)."""
    return frozenset(
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )


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
