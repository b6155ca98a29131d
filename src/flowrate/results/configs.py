"""A record's configuration, typed by its kind: a run's and a check's is the RunConfig it ran, a
generation's the GenerateConfig, a load test's and a survey's the few settings their records name.

Each is an open section (flowrate.results.codec): the keys its class names are read as typed
attributes, any other key a record holds (an older or newer flowrate's) is kept in ``extra``, and
the configuration is written again with the keys it was read with, in their order. A key a record
lacks reads as its field's default. Every kind's configuration answers the attributes of
SharedConfig, which the readers that list, filter, compare and plot records of any kind read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from flowrate.config import GenerateConfig, RunConfig
from flowrate.results.codec import decode
from flowrate.results.sections import Kind


class SharedConfig(Protocol):
    """What every kind's configuration says (None where a kind has no such setting); the enums of
    a run's configuration are strings too."""

    @property
    def problem(self) -> str | None: ...

    @property
    def size(self) -> str | None: ...

    @property
    def mode(self) -> str | None: ...

    @property
    def precision(self) -> str | None: ...

    @property
    def execution(self) -> str | None: ...

    @property
    def optimizer(self) -> str | None: ...

    @property
    def device(self) -> str | None: ...

    @property
    def threads(self) -> int | None: ...

    @property
    def freed_memory(self) -> str | None: ...


def freed_memory_asked(config: Configuration) -> str | None:
    """The freed-memory policy the configuration asked for; None for a record made before the
    setting (its process kept freed memory or not as its environment says)."""
    held = config.written is None or "freed_memory" in config.written
    return config.freed_memory if held else None


def as_text(value: str | None) -> str | None:
    """A setting as the plain string a record holds (an Enum member as its value)."""
    return None if value is None else str(value)


@dataclass(frozen=True)
class ServeRecordConfig:
    """A load test's configuration as its record names it (the load itself is in the serving
    section): it runs remotely, on the server's precision."""

    device: str | None = "remote"
    precision: str | None = None
    size: str | None = None
    mode: str | None = "serve"
    execution: str | None = "remote"
    problem: str | None = "serve"
    extra: dict[str, object] = field(default_factory=dict, compare=False, repr=False)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def optimizer(self) -> None:
        return None

    @property
    def threads(self) -> None:
        return None

    @property
    def freed_memory(self) -> None:
        return None


@dataclass(frozen=True)
class SurveyRecordConfig:
    """A survey's configuration: quick or full, the seconds each figure was timed, the threads."""

    problem: str | None = "survey"
    mode: str | None = "survey"
    device: str | None = None
    quick: bool | None = None
    seconds: float | None = None
    threads: int | None = None
    extra: dict[str, object] = field(default_factory=dict, compare=False, repr=False)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def size(self) -> None:
        return None

    @property
    def precision(self) -> None:
        return None

    @property
    def execution(self) -> None:
        return None

    @property
    def optimizer(self) -> None:
        return None

    @property
    def freed_memory(self) -> None:
        return None


Configuration = RunConfig | GenerateConfig | ServeRecordConfig | SurveyRecordConfig

CONFIG_TYPES: dict[Kind, type[Configuration]] = {
    Kind.RUN: RunConfig,
    Kind.CHECK: RunConfig,
    Kind.GENERATE: GenerateConfig,
    Kind.SERVE: ServeRecordConfig,
    Kind.SURVEY: SurveyRecordConfig,
}


def config_from(kind: Kind, data: Mapping[str, Any]) -> Configuration:
    """The configuration a record of ``kind`` holds, from its plain values."""
    found: Configuration = decode(CONFIG_TYPES[kind], data)
    return found
