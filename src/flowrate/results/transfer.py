"""Moving runs in and out of the store: JSON lines (lossless) and CSV (for spreadsheets).

A JSON-lines export holds one Result per line, each with a ``tags`` list beside its fields, so
``flowrate import`` restores runs and tags exactly. A single result file (``--out``, ``--json``)
imports too. Every record read is validated (results/validate.py) and one that is not refuses the
whole file, naming the line and the field. CSV is one row per run with the headline figures; it is
for reading, not importing. ``import_files`` is `flowrate import`: files read, then each recorded.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowrate.errors import FlowrateError, PathError
from flowrate.io import write_atomic
from flowrate.results.metrics import METRICS
from flowrate.results.schema import Result
from flowrate.results.store import Store, StoredRun
from flowrate.results.validate import InvalidResult, tag_problem

RESULT_SUFFIXES = (".json", ".jsonl")

EXPORT_FORMATS = ("jsonl", "csv")


def to_jsonl(runs: Sequence[StoredRun]) -> str:
    lines = []
    for run in runs:
        record = json.loads(run.result_json)
        record["tags"] = list(run.tags)
        lines.append(json.dumps(record, allow_nan=False))
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
                _cell(result.environment.torch.version if result.environment.torch else None),
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


def result_file(ref: str) -> Path | None:
    """The file a run reference names, or None where it names a run id or tag in the store.

    A reference is a file only when it ends in .json or .jsonl and is one: an id or a tag never
    reads a file, whatever lies in the current folder. A reference with a path separator that is
    no such file is refused, not looked up (no run id holds one).
    """
    path = Path(ref)
    if ref.lower().endswith(RESULT_SUFFIXES) and path.is_file():
        return path
    if "/" in ref or os.sep in ref:
        raise FlowrateError(
            f"{ref!r} is no result file (a result file is a .json or .jsonl file that exists) and no "
            "run id or tag (those hold no path separator)"
        )
    return None


def read_results(path: Path) -> list[tuple[Result, list[str]]]:
    """Every result in a file: JSON lines (an export), or one result as a JSON document.

    Any unreadable line fails the whole file, naming the line, so an import is all or nothing.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise PathError(f"cannot read {path}", error) from None
    except UnicodeDecodeError:
        raise InvalidResult(
            f"{path} is not UTF-8 text: expected flowrate results as JSON; nothing was imported"
        ) from None
    stripped = text.strip()
    if not stripped:
        raise FlowrateError(f"{path} is empty: expected flowrate results as JSON lines or one JSON result")
    whole = _json(stripped, f"{path}", quiet=True)
    if isinstance(whole, dict):
        return [_entry(whole, f"{path}")]
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        record = _json(line, f"{path} line {number}")
        if not isinstance(record, dict):
            raise InvalidResult(f"{path} line {number} is not a JSON object; nothing was imported")
        entries.append(_entry(record, f"{path} line {number}"))
    return entries


@dataclass(frozen=True)
class Imported:
    """One file's import: the runs it added and those already in the store, left as they were."""

    file: str
    added: int
    kept: int
    store: Path


def import_files(
    files: Sequence[str],
    store: str | None,
    tags: Sequence[str] = (),
    on_file: Callable[[Imported], None] | None = None,
) -> list[Imported]:
    """Every file read before anything is written (one unreadable file imports nothing), then
    each file's runs added to the store at ``store`` in one transaction, with their own tags and
    ``tags``; ``on_file`` hears each file as it is recorded."""
    loaded = {file: read_results(Path(file)) for file in files}
    done = []
    with Store(store) as opened:
        for file, entries in loaded.items():
            added = opened.add_many([(result, [*own, *tags]) for result, own in entries])
            done.append(Imported(file, len(added), len(entries) - len(added), opened.path))
            if on_file is not None:
                on_file(done[-1])
    return done


def _json(text: str, where: str, quiet: bool = False) -> Any:
    """The JSON in ``text``; an error naming ``where`` (or None when ``quiet``) if there is none."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        if quiet:
            return None
        raise InvalidResult(f"{where} is not JSON ({error.msg}); nothing was imported") from None
    except RecursionError:
        raise InvalidResult(f"{where} is JSON nested too deeply; nothing was imported") from None


def _entry(record: dict[str, Any], where: str) -> tuple[Result, list[str]]:
    tags = record.get("tags") or []
    if not isinstance(tags, list):
        raise InvalidResult(f"{where}: tags must be a list of strings; nothing was imported")
    for tag in tags:
        problem = tag_problem(tag)
        if problem:
            raise InvalidResult(f"{where}: {problem}; nothing was imported")
    try:
        result = Result.from_dict(record)
    except FlowrateError as error:
        raise InvalidResult(f"{where}: {error}; nothing was imported") from None
    if not result.run_id:
        raise InvalidResult(f"{where}: the result has no run_id; nothing was imported")
    return result, tags
