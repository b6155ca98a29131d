"""The benchmark record: each run of a script under benchmarks/ writes one JSON result.

A script ends its main with ``record("overhead", [Figure(...), ...])``: the command line, the
commit of the checkout, the UTC date, the machine (flowrate's environment fingerprint, a short
description and the load average) and every figure it printed, each with its unit, its target and
the verdict against it, go to ``benchmarks/results/<benchmark>/<UTC timestamp>.json``
(``FLOWRATE_BENCHMARK_RESULTS`` names another folder: a device machine's output folder, say).
benchmarks/render_results.py makes benchmarks/RESULTS.md from those files.

Keys are written sorted, so the same result is the same bytes.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
RESULTS_ENV = "FLOWRATE_BENCHMARK_RESULTS"  # another folder for the results (a device's $OUT)
FORMAT = 1  # history of the format: 1, the first

COMPARISONS = (">=", "<=", ">", "<", "==")
MET, MISSED, NO_TARGET = "met", "missed", "no target"


@dataclass(frozen=True)
class Target:
    """What a figure must be: ``value <comparison> threshold``."""

    comparison: str  # one of COMPARISONS
    threshold: float

    def __post_init__(self) -> None:
        if self.comparison not in COMPARISONS:
            raise ValueError(f"target comparison {self.comparison!r}: one of {', '.join(COMPARISONS)}")

    def holds(self, value: float) -> bool:
        return {
            ">=": value >= self.threshold,
            "<=": value <= self.threshold,
            ">": value > self.threshold,
            "<": value < self.threshold,
            "==": value == self.threshold,
        }[self.comparison]

    def __str__(self) -> str:
        return f"{self.comparison} {self.threshold:g}"


@dataclass(frozen=True)
class Figure:
    """One figure a benchmark printed: its value (None: not measured, the note says why)."""

    name: str
    value: float | None
    unit: str = ""
    target: Target | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.target is not None and not isinstance(self.target, Target):
            raise TypeError(f"figure {self.name!r}: its target is a Target or None, not {self.target!r}")

    @property
    def verdict(self) -> str:
        """Met or missed against the target (missed when not measured); "no target" without one."""
        if self.target is None:
            return NO_TARGET
        return MET if self.value is not None and self.target.holds(self.value) else MISSED


@dataclass(frozen=True)
class Machine:
    """Where it ran: flowrate's environment fingerprint, in words, and the load average."""

    description: str
    fingerprint: dict[str, Any] = field(default_factory=dict)
    load_average: tuple[float, float, float] | None = None  # 1, 5 and 15 minutes, at record time


@dataclass(frozen=True)
class Result:
    """One run of one benchmark."""

    benchmark: str  # the folder under results/: the script's name, or name-part
    command: str
    commit: str | None  # None: not run from a checkout
    dirty: bool | None  # uncommitted changes in the checkout
    date: str  # UTC, ISO 8601 to the second: 2026-11-28T00:41:07Z
    machine: Machine
    figures: tuple[Figure, ...]
    note: str = ""


def to_json(result: Result) -> str:
    data = asdict(result)
    for figure, written in zip(result.figures, data["figures"], strict=True):
        written["verdict"] = figure.verdict  # for a reader of the file; recomputed when read
    return json.dumps({"format": FORMAT, **data}, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def from_json(text: str) -> Result:
    """The result a file holds; a KeyError, TypeError or ValueError where it is not one."""
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"not a benchmark result of format {FORMAT}")
    machine = data["machine"]
    load = machine.get("load_average")

    def target(data: dict[str, Any] | None) -> Target | None:
        return None if data is None else Target(data["comparison"], data["threshold"])

    figures = tuple(
        Figure(
            name=f["name"],
            value=None if f["value"] is None else float(f["value"]),
            unit=f["unit"],
            target=target(f["target"]),
            note=f["note"],
        )
        for f in data["figures"]
    )
    return Result(
        benchmark=data["benchmark"],
        command=data["command"],
        commit=data["commit"],
        dirty=data["dirty"],
        date=data["date"],
        machine=Machine(machine["description"], dict(machine["fingerprint"]), load and tuple(load)),
        figures=figures,
        note=data["note"],
    )


def write(result: Result, root: Path) -> Path:
    """``root/<benchmark>/<date>.json`` (``-2``, ``-3``… after the date when that file exists)."""
    from flowrate.io import write_atomic

    folder = root / result.benchmark
    folder.mkdir(parents=True, exist_ok=True)
    stem = result.date.replace(":", "-")
    path, count = folder / f"{stem}.json", 1
    while path.exists():
        count += 1
        path = folder / f"{stem}-{count}.json"
    write_atomic(path, to_json(result))
    return path


def command_line(argv: list[str]) -> str:
    """``python SCRIPT ARGS``, the script relative to the checkout when it lies inside it."""
    script = Path(argv[0]).resolve() if argv else None
    if script is not None and script.is_relative_to(ROOT):
        argv = [str(script.relative_to(ROOT)), *argv[1:]]
    return shlex.join(["python", *argv])


def this_machine(device: str | None = None) -> tuple[Machine, str | None, bool | None]:
    """This machine (``device``: "cpu", "cuda"; None: CUDA when present) and the checkout's
    commit and dirtiness, from flowrate's own environment collection."""
    import torch

    from flowrate.measure.env import collect_environment
    from flowrate.results.environment import environment_fingerprint, environment_from

    chosen = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    env = environment_from(collect_environment(chosen, argv=[]))
    fingerprint = environment_fingerprint(env)
    what = env.device_name if chosen.type != "cpu" else (env.cpu.model if env.cpu else None)
    count = fingerprint["num_threads"]
    threads = f", {count} thread{'s' if count != 1 else ''}" if count else ""
    description = f"{what or chosen.type}, torch {fingerprint['torch_version']}{threads}"
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    software = env.flowrate
    return (
        Machine(description, fingerprint, load and (round(load[0], 2), round(load[1], 2), round(load[2], 2))),
        software.commit if software else None,
        software.dirty if software else None,
    )


def record(
    benchmark: str,
    figures: list[Figure],
    *,
    note: str = "",
    device: str | None = None,
    root: Path | None = None,
) -> Path:
    """Write this run's result and say where (on stderr); a benchmark's script calls it at the end of
    its main."""
    machine, commit, dirty = this_machine(device)
    result = Result(
        benchmark=benchmark,
        command=command_line(sys.argv),
        commit=commit,
        dirty=dirty,
        date=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        machine=machine,
        figures=tuple(figures),
        note=note,
    )
    path = write(result, root or Path(os.environ.get(RESULTS_ENV) or RESULTS))
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    print(f"recorded {shown} (python benchmarks/render_results.py makes RESULTS.md)", file=sys.stderr)
    return path
