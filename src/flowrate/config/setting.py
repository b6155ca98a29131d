"""A setting declared once: each config field carries its Setting in its metadata (help, flags,
bounds, unit, whether a sweep or an exploration may vary it), and everything else is read from it.

    batch_size: int | str | None = setting(None, help="Samples per step, …", flags=("-b", "--batch-size"),
                                           kind="batch", bounds=COUNT)

From the field and its Setting come the command line's options (flowrate.cli.options generates
them), the command line's value types and RunConfig's validation (the bounds), a sweep's or an
exploration's keys, aliases and typed values (flowrate.campaigns.sweep.spec), and the reference
table the docs print (``reference``). Change a bound, a flag or a help text here, and every one
of them follows.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from flowrate.config import values
from flowrate.config.bounds import Bounds
from flowrate.errors import ConfigError

SETTING = "flowrate.setting"  # the key of a field's Setting in its metadata

# how a value is read: an integer, a number, on/off, an integer or "auto" (batch: kept as "auto";
# count_or_auto: None), one of an enum's names, text, a folder's path, or KEY=VALUE integers (the
# problem's options, each read on its own)
Kind = Literal["int", "float", "bool", "batch", "count_or_auto", "choice", "text", "folder", "options"]
_KIND_WORDS: dict[str, str] = {
    "int": "integer",
    "float": "number",
    "bool": "on/off",
    "batch": "integer or auto",
    "count_or_auto": "integer or auto",
    "choice": "choice",
    "text": "text",
    "folder": "folder",
    "options": "KEY=VALUE integers",
}


@dataclass(frozen=True, eq=False)  # one object per declaration: hashed by identity, quickly
class Setting:
    """What a config field is to its users: the words, flags and numbers every surface shows."""

    help: str  # the --help text, without its default
    flags: tuple[str, ...] = ()  # short first, then long ones (the first long is the flag's name,
    # the others old spellings kept as aliases); (): "--" and the field's name with dashes
    kind: Kind | None = None  # None: from the field's type (bool, int, float, an enum, str)
    bounds: Bounds | None = None  # the numbers a numeric setting may take
    unit: str = ""  # what the number counts: s, GiB, steps, samples, …
    metavar: str | None = None  # how --help names the value, e.g. N|auto
    default_help: str | None = None  # what --help says the default is, when the field's default
    # does not say it ("the problem's"); "" says nothing
    spellings: tuple[str, ...] = ()  # more names a choice takes on the command line
    sweepable: bool = True  # a sweep's grid or an exploration's space may vary it
    own_option: bool = True  # False: the command line sets it through other flags (-O, --seq-len)
    spell: Callable[[str], str] | None = None  # text: its one spelling (bf16 for BF16), or ConfigError


def setting(default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING, **spec: Any) -> Any:
    """A dataclass field with ``default`` (or ``factory``) whose metadata holds Setting(**spec)."""
    metadata = {SETTING: Setting(**spec)}
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class SettingField:
    """One field of a config class with its Setting: its name, default, how it is read."""

    name: str
    default: Any  # the field's default (a factory's value for problem_options)
    kind: Kind
    choices: type[enum.Enum] | None  # the enum a "choice" field takes
    setting: Setting

    @property
    def flags(self) -> tuple[str, ...]:
        return self.setting.flags or ("--" + self.name.replace("_", "-"),)

    @property
    def flag(self) -> str:
        """The flag's name: its first long spelling (--lr for learning_rate)."""
        return next(f for f in self.flags if f.startswith("--"))

    @property
    def aliases(self) -> tuple[str, ...]:
        """Every long spelling as a sweep key is written (lr, duration, batch_size) but the field's own."""
        names = (f[2:].replace("-", "_") for f in self.flags if f.startswith("--"))
        return tuple(n for n in names if n != self.name)

    @property
    def bounds(self) -> Bounds | None:
        return self.setting.bounds

    @property
    def default_text(self) -> str:
        """What --help says the default is ("" when it says nothing)."""
        if self.setting.default_help is not None:
            return self.setting.default_help
        if self.default is None or isinstance(self.default, bool):
            return ""
        return str(self.default)

    @property
    def help(self) -> str:
        """The --help text: the Setting's, then its default."""
        shown = self.default_text
        return self.setting.help + (f" [default: {shown}]" if shown else "")

    @property
    def choice_names(self) -> tuple[str, ...]:
        """The names a choice takes on the command line: the enum's values, then other spellings."""
        assert self.choices is not None
        return (*(str(c.value) for c in self.choices), *self.setting.spellings)

    def read(self, value: Any) -> Any:
        """``value`` as given (text, or a TOML value) typed as the field takes it; ConfigError(name)
        when it cannot be read. Bounds are the config's to check (``check``)."""
        try:
            return self._read(value)
        except values.BadValue as bad:
            raise ConfigError(self.name, f"cannot read {bad.value!r} as {bad.wanted}") from None

    def _read(self, value: Any) -> Any:
        kind = self.kind
        if kind == "int":
            return values.to_int(value)
        if kind == "float":
            return values.to_float(value)
        if kind == "bool":
            return values.to_bool(value)
        if kind == "batch":
            return values.to_batch(value)
        if kind == "count_or_auto":
            return values.to_count_or_auto(value)
        text = value.strip() if isinstance(value, str) else value
        if not isinstance(text, str) or not text:
            raise ConfigError(self.name, f"expected a name, got {value!r}")
        if self.choices is not None:
            parse = getattr(self.choices, "parse", self.choices)
            return parse(text).value  # its one spelling: bf16, not BF16 or bfloat16
        return self.setting.spell(text) if self.setting.spell is not None else text

    def check(self, value: Any) -> None:
        """ConfigError(name) when ``value`` is outside the field's bounds (None: unset, fine)."""
        if self.bounds is not None and value is not None and value != values.AUTO:
            self.bounds.check(self.name, value)


def settings(cls: type) -> tuple[SettingField, ...]:
    """Every field of the dataclass ``cls`` that declares a Setting, in field order, read from the
    fields' metadata as it is now (made once per set of Settings: RunConfig reads them at each
    construction)."""
    return _settings(cls, tuple(f.metadata.get(SETTING) for f in dataclasses.fields(cls)))


@functools.cache
def _settings(cls: type, specs: tuple[Setting | None, ...]) -> tuple[SettingField, ...]:
    hints = typing.get_type_hints(cls)
    found = []
    for field, spec in zip(dataclasses.fields(cls), specs, strict=True):
        if spec is None:
            continue
        if field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        else:
            default = None if field.default is dataclasses.MISSING else field.default
        kind, choices = _kind(hints[field.name], spec)
        found.append(SettingField(field.name, default, kind, choices, spec))
    return tuple(found)


def setting_of(cls: type, name: str) -> SettingField:
    """The field ``name`` of ``cls`` with its Setting; KeyError when it has none."""
    for found in settings(cls):
        if found.name == name:
            return found
    raise KeyError(name)


def _kind(hint: Any, spec: Setting) -> tuple[Kind, type[enum.Enum] | None]:
    """How a field of type ``hint`` is read (its Setting may say), and the enum of a choice."""
    args = typing.get_args(hint) or (hint,)
    choices = next((a for a in args if isinstance(a, type) and issubclass(a, enum.Enum)), None)
    if spec.kind is not None:
        return spec.kind, choices
    if choices is not None:
        return "choice", choices
    for kind in (bool, int, float):
        if kind in args:
            return typing.cast(Kind, kind.__name__), None
    return "text", None


# --- the reference table --------------------------------------------------------------------------


@dataclass(frozen=True)
class ReferenceRow:
    """One setting as the docs' reference table lists it (every cell text)."""

    field: str
    flags: str  # "-b, --batch-size"
    type: str  # "integer", "choice: fp32, tf32, …"
    default: str
    bounds: str  # "[1, 2147483647]", or "" for a setting without
    unit: str
    help: str
    sweepable: str  # "yes" or "no"


def _plain(default: Any) -> str:
    """A default --help leaves unsaid, for the table: off for an on/off, nothing for none."""
    if isinstance(default, bool):
        return "on" if default else "off"
    return "" if default is None or default == {} else str(default)


def reference(cls: type) -> list[ReferenceRow]:
    """One row per setting of ``cls``, in field order."""
    rows = []
    for found in settings(cls):
        kind = _KIND_WORDS[found.kind]
        if found.choices is not None:
            kind = f"choice: {', '.join(str(c.value) for c in found.choices)}"
        rows.append(
            ReferenceRow(
                field=found.name,
                flags=", ".join(found.flags),
                type=kind,
                default=found.default_text or _plain(found.default),
                bounds=found.bounds.interval() if found.bounds is not None else "",
                unit=found.setting.unit,
                help=found.setting.help,
                sweepable="yes" if found.setting.sweepable else "no",
            )
        )
    return rows
