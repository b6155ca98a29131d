"""What every library source shares: its settings, the missing-extra error and its protocol.

A source module (``hf``, ``timm_source``, ``vision_source``) defines, at module level:

    PREFIX: str                      # "hf", "timm", "torchvision": the part before the ':'
    EXTRA: str                       # the pip extra that installs its library
    def build_problem(name: str, settings: SourceSettings) -> Problem
    def list_names() -> list[tuple[str, str]]   # (name, one-line description), for `flowrate list --source`

The registry imports the module lazily; an ImportError of its library becomes MissingExtra.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from flowrate.errors import FlowrateError
from flowrate.problems.base import Problem


@dataclass(frozen=True)
class SourceSettings:
    """The shape flags that apply to a library model (None: the source's default)."""

    seq_len: int | None = None
    image_size: int | None = None
    # raw key=value strings from --hf-config; each source parses (and types) its own
    overrides: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    preset: str | None = None


class MissingExtra(FlowrateError):
    """A prefix whose library is not installed: names the extra that installs it."""

    def __init__(self, spec: str, extra: str) -> None:
        self.spec = spec
        self.extra = extra
        super().__init__(f"{spec} needs the `{extra}` extra: pip install -e '.[{extra}]'")


class Source(Protocol):
    """The module-level protocol of a source module (checked by mypy where a module is passed)."""

    PREFIX: str
    EXTRA: str

    def build_problem(self, name: str, settings: SourceSettings) -> Problem: ...

    def list_names(self) -> list[tuple[str, str]]: ...
