"""Moving runs in and out of the store: JSON lines (lossless) and CSV (for spreadsheets).

A JSON-lines export holds one Result per line, each with a ``tags`` list beside its fields, so
``flowrate import`` restores runs and tags exactly. A single result file (``--out``, ``--json``)
imports too. CSV is one row per run with the headline figures; it is for reading, not importing.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flowrate.errors import FlowrateError
from flowrate.io import write_atomic
from flowrate.results.metrics import METRICS
from flowrate.results.schema import Result
from flowrate.results.store import StoredRun

EXPORT_FORMATS = ("jsonl", "csv")


def to_jsonl(runs: Sequence[StoredRun]) -> str:
    lines = []
    for run in runs:
        record = json.loads(run.result_json)
        record["tags"] = list(run.tags)
        lines.append(json.dumps(record, allow_nan=True))
    return "".join(line + "\n" for line in lines)


_CSV_CONFIG = (
    "problem",
    "size",
    "mode",
    "precision",
    "execution",
    "device_type",
    "device_name",
    "batch_size",
)


def to_csv(runs: Sequence[StoredRun]) -> str:
    """One row per run: identity, configuration, then every metric (empty where not recorded)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "run_id",
            "created_at",
            "tags",
            *_CSV_CONFIG,
            *METRICS,
            "median_samples_per_sec",
            "cv",
            "ci95_low_samples_per_sec",
            "ci95_high_samples_per_sec",
            "torch_version",
            "flowrate_version",
        ]
    )
    for run in runs:
        result = run.result
        s = result.summary
        writer.writerow(
            [
                run.run_id,
                run.created_at,
                ";".join(run.tags),
                *(_cell(getattr(run, name)) for name in _CSV_CONFIG),
                *(_cell(metric.value(result)) for metric in METRICS.values()),
                _cell(s.median_samples_per_sec),
                _cell(s.cv),
                _cell(s.ci95_low_samples_per_sec),
                _cell(s.ci95_high_samples_per_sec),
                _cell((result.environment.get("torch") or {}).get("version")),
                _cell(result.flowrate_version),
            ]
        )
    return out.getvalue()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # shortest exact text: the spreadsheet gets every digit
    return str(value)


def export(runs: Sequence[StoredRun], path: Path | None, fmt: str) -> str:
    """Write runs to ``path`` atomically (or return the text for stdout when path is None)."""
    if fmt not in EXPORT_FORMATS:
        raise FlowrateError(f"unknown export format {fmt!r}; use {' or '.join(EXPORT_FORMATS)}")
    text = to_jsonl(runs) if fmt == "jsonl" else to_csv(runs)
    if path is not None:
        write_atomic(path, text)
    return text


def read_results(path: Path) -> list[tuple[Result, list[str]]]:
    """Every result in a file: JSON lines (an export), or one result as a JSON document.

    Any unreadable line fails the whole file, naming the line, so an import is all or nothing.
    """
    try:
        text = path.read_text()
    except OSError as error:
        raise FlowrateError(f"cannot read {path}: {error.strerror}") from None
    stripped = text.strip()
    if not stripped:
        raise FlowrateError(f"{path} is empty: expected flowrate results as JSON lines or one JSON result")
    try:
        whole = json.loads(stripped)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return [_entry(whole, f"{path}")]
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise FlowrateError(
                f"{path} line {number} is not JSON ({error.msg}); nothing was imported"
            ) from None
        if not isinstance(record, dict):
            raise FlowrateError(f"{path} line {number} is not a JSON object; nothing was imported")
        entries.append(_entry(record, f"{path} line {number}"))
    return entries


def _entry(record: dict[str, Any], where: str) -> tuple[Result, list[str]]:
    tags = record.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise FlowrateError(f"{where}: tags must be a list of strings; nothing was imported")
    try:
        result = Result.from_dict(record)
    except FlowrateError as error:
        raise FlowrateError(f"{where}: {error}; nothing was imported") from None
    except (KeyError, TypeError, ValueError) as error:
        raise FlowrateError(
            f"{where}: not a flowrate result ({type(error).__name__}: {error}); nothing was imported"
        ) from None
    if not result.run_id:
        raise FlowrateError(f"{where}: the result has no run_id; nothing was imported")
    return result, tags
