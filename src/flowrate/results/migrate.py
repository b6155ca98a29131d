"""Every earlier layout of a result record, brought to this version's: one function, one step per
version.

Result.from_dict calls ``upgrade`` on every record it reads — a file, an export line, a row of the
store — after validate_record has checked it and before the typed record is built. Each step
takes a record of version n to version n+1 and changes only what that version changed; a field a
version added and an earlier record lacks reads with its default (an empty section reads with
every field None). No step changes a number: a record reads back with the numbers it holds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flowrate.results.sections import Kind, ProblemInfo

Record = dict[str, Any]

_PROBLEM_FIELDS = {name for name in ProblemInfo.__dataclass_fields__ if name != "settings"}


def _kind(record: Record) -> Kind:
    """A record before version 7 said its kind by the section only that kind writes."""
    if record.get("serving") is not None:
        return Kind.SERVE
    if record.get("generation") is not None:
        return Kind.GENERATE
    if record.get("fidelity") is not None:
        return Kind.CHECK
    return Kind.RUN


def _to_7(record: Record) -> Record:
    """Version 7: the record names its kind; a generation's problem keeps the model's shape under
    ``settings`` like every other problem (it was spread beside the name)."""
    record["kind"] = _kind(record).value
    problem = record.get("problem")
    if isinstance(problem, dict):
        extra = {k: v for k, v in problem.items() if k not in _PROBLEM_FIELDS and k != "settings"}
        if extra:
            kept = {k: v for k, v in problem.items() if k not in extra}
            record["problem"] = {**kept, "settings": {**extra, **(problem.get("settings") or {})}}
    return record


def _unchanged(record: Record) -> Record:
    """A version whose additions all read with their defaults (see schema.py's history)."""
    return record


# STEPS[n] takes a record of version n to n + 1
STEPS: dict[int, Callable[[Record], Record]] = {
    1: _unchanged,  # 2: flops, energy, memory, repeat, fidelity; checkpoint fields
    2: _unchanged,  # 3: streaming, input, estimate
    3: _unchanged,  # 4: distributed, compile, operators; census and mixed-MFU fields
    4: _unchanged,  # 5: serving
    5: _unchanged,  # 6: an unknown spread is None (earlier records keep the numbers they hold)
    6: _to_7,
}


def upgrade(record: Record, newest: int) -> Record:
    """``record`` (validated, any version up to ``newest``) as a version ``newest`` record. The
    record given is not changed: each step replaces what it changes, never changing it in place."""
    version = record["schema_version"]
    if version == newest:  # one written by hand may leave its kind out: it is read from its sections
        return record if "kind" in record else {**record, "kind": _kind(record).value}
    out = dict(record)
    for step in range(version, newest):
        out = STEPS[step](out)
    out["schema_version"] = newest
    return out
