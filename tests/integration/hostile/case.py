"""One row of the corpus, and the folder it runs in."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# Exit codes the README promises.
OK, FAILED, USAGE, INTERRUPTED = 0, 1, 2, 130

# Beyond any 64-bit integer: the value that reached C++ frames in issue 14.
HUGE = "99999999999999999999999"

# The runs every workspace's store holds (tests/integration/hostile/setups.py makes them).
RUN_A, RUN_B = "aaaa00000001", "bbbb00000002"
# The run in the workspace's result file (not in the store).
RUN_FILE = "cccc00000003"


@dataclass
class Workspace:
    """The folder a case runs in (also its working directory), its named paths and environment."""

    root: Path
    templates: dict[str, Path]  # the good store, result file and dataset, made once per session
    paths: dict[str, Path] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    fifo_readers: list[str] = field(default_factory=list)  # FIFOs someone reads, as `cat` would
    cleanups: list[Callable[[], None]] = field(default_factory=list)  # undone after the case (a mount)

    def path(self, name: str, relative: str | None = None) -> Path:
        """The path called ``name`` (made up as root/relative, or root/name, the first time)."""
        if name not in self.paths:
            self.paths[name] = self.root / (relative or name)
        return self.paths[name]

    def placeholders(self) -> dict[str, str]:
        return {"tmp": str(self.root), **{name: str(path) for name, path in self.paths.items()}}


Setup = Callable[[Workspace], None]


@dataclass(frozen=True)
class Case:
    """A command a user might type, what it must answer, and what it must leave as it was.

    ``argv`` may name the workspace's paths as {placeholders}. ``code`` is the exit code (or the
    codes) the README promises; with a non-zero code, every fragment in ``says`` is in the one
    `error:` line and none of ``not_says`` is. ``watch`` maps path names to what a success must
    leave there (json, jsonl, csv, html, png, db, db+, same, link, absent); a failure leaves them unchanged.
    The store is always watched. ``xfail`` names the issue-14 mechanism that has yet to fix it.
    """

    id: str
    argv: tuple[str, ...]
    code: int | tuple[int, ...]
    says: tuple[str, ...] = ()
    setup: Setup | None = None
    watch: Mapping[str, str] = field(default_factory=dict)
    driver: str = "in"  # in (this process), proc, sigint, closed-stdout, full-stdout, pty, torchrun
    timeout_s: float = 120.0
    not_says: tuple[str, ...] = ()
    out: tuple[str, ...] = ()  # fragments stdout must hold
    out_json: bool = False  # stdout must be strict JSON (no NaN or Infinity)
    warns: tuple[str, ...] = ()  # each fragment in some `warning:` line
    before_measuring: bool = False  # refused before a step ran (argv runs {user}:marked)
    unprivileged: bool = False  # file permissions apply (a root test process drops its override)
    check: Callable[[Workspace, Any], list[str]] | None = None  # more problems to report
    xfail: str | None = None
    intermittent: bool = False  # fails only sometimes today: its xfail cannot be strict

    @property
    def codes(self) -> tuple[int, ...]:
        return self.code if isinstance(self.code, tuple) else (self.code,)


def params(cases: list[Case]) -> list[Any]:
    """The cases as pytest params: named by id, strict xfail where a fix is still to come.

    HOSTILE_IGNORE_XFAIL=1 runs every case plainly: the list of what still fails, and why.
    """
    ids = [case.id for case in cases]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, f"case ids used twice: {duplicates}"
    plain = os.environ.get("HOSTILE_IGNORE_XFAIL") == "1"
    return [
        pytest.param(
            case,
            id=case.id,
            marks=[pytest.mark.xfail(strict=not case.intermittent, reason=f"issue 14: {case.xfail}")]
            if case.xfail and not plain
            else [],
        )
        for case in cases
    ]


def combine(*setups: Setup | None) -> Setup:
    """One set-up that runs several in order."""

    def run(ws: Workspace) -> None:
        for setup in setups:
            if setup is not None:
                setup(ws)

    return run


# A run of the smallest zoo problem, and settings that make it take a fraction of a second.
RUN = ("run", "-p", "fc_mnist", "--size", "debug")
TINY = ("--steps", "2", "--preheat", "1")
# A run of the user problem whose loss leaves a file `measured`: a case can tell no step ran.
MARKED_RUN = ("run", "-p", "{user}:marked", *TINY)
