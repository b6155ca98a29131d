"""What every case checks: the exit code, one `error:` line, no traceback, and that nothing
watched was damaged: unchanged after a failure, complete (and still the same kind of file: a
symlink stays a symlink, a FIFO a FIFO) after a success."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hostile.case import Case, Workspace


@dataclass
class Outcome:
    code: int | None  # None: the command raised instead of exiting
    stdout: str
    stderr: str
    crash: str | None = None  # an exception that escaped, or a hang, in words
    fifo_data: dict[str, bytes] = field(default_factory=dict)  # what readers of watched FIFOs got


@dataclass(frozen=True)
class Snapshot:
    kind: str  # missing, file, symlink, fifo, chardev, dir, other
    mode: int = 0
    content: bytes | None = None  # a regular file's bytes (a symlink's: its target's)
    link: str | None = None  # a symlink's text
    target_kind: str | None = None  # what a symlink points at
    listing: tuple[str, ...] = ()  # a folder's entries
    siblings: tuple[str, ...] = ()  # NAME-wal, NAME-shm, .NAME.*.tmp …: what writers leave beside it


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "symlink"),
        (stat.S_ISREG, "file"),
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISCHR, "chardev"),
        (stat.S_ISDIR, "dir"),
    ):
        if test(mode):
            return name
    return "other"


def snapshot(path: Path) -> Snapshot:
    try:
        info = path.lstat()
    except OSError:
        return Snapshot("missing", siblings=_siblings(path))
    kind = _kind(info.st_mode)
    content = link = target_kind = None
    listing: tuple[str, ...] = ()
    if kind == "symlink":
        link = os.readlink(path)
        try:
            target_kind = _kind(path.stat().st_mode)
        except OSError:
            target_kind = "missing"
    if kind == "file" or target_kind == "file":
        try:
            content = path.read_bytes()
        except OSError:
            content = None  # unreadable (a permissions case): its mode still counts
    if kind == "dir":
        try:
            listing = tuple(sorted(p.name for p in path.iterdir()))
        except OSError:
            listing = ("<unreadable>",)
    return Snapshot(kind, info.st_mode, content, link, target_kind, listing, _siblings(path))


def _siblings(path: Path) -> tuple[str, ...]:
    try:
        names = os.listdir(path.parent)
    except OSError:
        return ()
    return tuple(
        sorted(
            n for n in names if n != path.name and (n.startswith(path.name) or n.startswith(f".{path.name}"))
        )
    )


def strict_json(text: str) -> Any:
    """JSON as RFC 8259 has it: NaN and Infinity are not JSON."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def store_run_ids(path: Path) -> set[str] | None:
    """The run ids in a store, read without writing anything beside it; None: not a readable store."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            if db.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
                return None
            return {row[0] for row in db.execute("SELECT run_id FROM runs")}
        finally:
            db.close()
    except sqlite3.Error:
        return None


def complete(form: str, data: bytes, before_ids: set[str] | None, path: Path) -> str | None:
    """Why ``data`` (just written) is not a complete file of ``form``; None when it is."""
    if form == "db":
        ids = store_run_ids(path)
        if ids is None:
            return "not a readable store any more"
        if before_ids is not None and not before_ids <= ids:
            return f"runs lost: {sorted(before_ids - ids)}"
        return None
    if form == "png":
        return None if data.startswith(b"\x89PNG") else "not a PNG"
    try:
        text = data.decode()
        if form == "json" and not isinstance(strict_json(text), dict):
            return "not a JSON object"
        if form == "jsonl":
            lines = [line for line in text.splitlines() if line.strip()]
            if not lines or not all(isinstance(strict_json(line), dict) for line in lines):
                return "not JSON lines"
        if form == "csv" and not text.startswith("run_id,"):
            return "not the CSV export"
        if form == "html" and "</html>" not in text.lower():
            return "not a whole HTML page"
    except (UnicodeDecodeError, ValueError) as error:
        return f"not {form}: {error}"
    return None


def check_watched(
    name: str,
    form: str,
    path: Path,
    before: Snapshot,
    failed: bool,
    fifo_data: bytes | None,
    before_ids: set[str] | None,
) -> list[str]:
    """Unchanged after a failure; after a success the same kind of file, holding a complete ``form``."""
    after = snapshot(path)
    new_siblings = sorted(set(after.siblings) - set(before.siblings))
    problems = [f"{name}: left {new_siblings} beside it"] if new_siblings else []
    before, after = replace(before, siblings=()), replace(after, siblings=())  # reported above
    if form == "link":  # a symlink to a special file: it must stay that symlink
        if (after.kind, after.link) != (before.kind, before.link):
            problems.append(f"{name}: changed ({_describe(before)} -> {_describe(after)})")
        return problems
    if form == "absent":
        return problems + ([f"{name}: {path} was created"] if after.kind != "missing" else [])
    if form == "db+":  # a store that may grow even when the command fails later (stdout full)
        failed, form = False, "db"
    if failed or form == "same":
        if after != before:
            problems.append(f"{name}: changed ({_describe(before)} -> {_describe(after)})")
        return problems
    if before.kind not in ("missing", after.kind):
        return [*problems, f"{name}: a {before.kind} was replaced by a {after.kind}"]
    if after.kind == "symlink" and (after.link != before.link):
        return [*problems, f"{name}: the symlink now points at {after.link}"]
    if after.kind == "missing":
        return [*problems, f"{name}: nothing was written"]
    data = fifo_data if after.kind == "fifo" else after.content
    if after.kind in ("file", "symlink", "fifo"):
        why = complete(form, data or b"", before_ids, path)
        if why:
            problems.append(f"{name}: {why}")
    return problems


def _describe(shot: Snapshot) -> str:
    if shot.kind == "file":
        return f"file of {len(shot.content or b'')} bytes, mode {stat.S_IMODE(shot.mode):o}"
    if shot.kind == "symlink":
        return f"symlink to {shot.link} ({shot.target_kind}, {len(shot.content or b'')} bytes)"
    if shot.kind == "dir":
        return f"folder holding {list(shot.listing)}"
    return shot.kind


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def check_outcome(case: Case, outcome: Outcome, says: tuple[str, ...]) -> list[str]:
    """The exit code, the one error line and its fragments (``says``, placeholders filled), what a
    success prints."""
    problems: list[str] = []
    if outcome.crash:
        problems.append(outcome.crash)
    for stream, text in (("stdout", outcome.stdout), ("stderr", outcome.stderr)):
        if "Traceback (most recent call last)" in text or "Exception ignored" in text:
            problems.append(f"a traceback on {stream}: {_last_line(text)}")
    if outcome.code == -13 and 141 in case.codes:  # died of SIGPIPE, as `yes | head` does
        outcome.code = 141
    if outcome.code is not None and outcome.code < 0:
        problems.append(f"killed by signal {-outcome.code}")
    elif outcome.code is not None and outcome.code not in case.codes:
        problems.append(f"exit {outcome.code}, expected {' or '.join(map(str, case.codes))}")
    lines = error_lines(outcome.stderr)
    if outcome.code == 0:
        if lines:
            problems.append(f"exit 0 with {lines[0]!r}")
        problems += _success_output(case, outcome)
    elif outcome.code is not None and 141 in case.codes:  # a reader went away: silence is fine too
        if len(lines) > 1:
            problems.append(f"{len(lines)} error lines: {lines[:3]}")
    elif outcome.code is not None:
        if len(lines) != 1:
            problems.append(
                f"{len(lines)} error lines: {lines[:3]} (stderr ends {_last_line(outcome.stderr)!r})"
            )
        line = lines[0] if lines else ""
        if 0 not in case.codes:
            problems += [f"the error line lacks {f!r}: {line!r}" for f in says if f not in line]
            problems += [f"the error line says {f!r}: {line!r}" for f in case.not_says if f in line]
    return problems


def _success_output(case: Case, outcome: Outcome) -> list[str]:
    problems = [f"stdout lacks {f!r}" for f in case.out if f not in outcome.stdout]
    problems += [f"the output says {f!r}" for f in case.not_says if f in outcome.stdout + outcome.stderr]
    if case.out_json:
        try:
            strict_json(outcome.stdout)
        except ValueError as error:
            problems.append(f"stdout is not strict JSON ({error})")
    warnings = [line for line in outcome.stderr.splitlines() if line.startswith("warning:")]
    for fragment in case.warns:
        if not any(fragment in line for line in warnings):
            problems.append(f"no warning says {fragment!r} (warnings: {warnings[:3]})")
    return problems


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def watched_paths(case: Case, ws: Workspace) -> dict[str, tuple[str, Path]]:
    return {name: (form, ws.paths[name]) for name, form in {"store": "db", **case.watch}.items()}
