"""Set-ups: the files a hostile case needs, made in its workspace.

Every workspace starts with a good store holding two runs (RUN_A, RUN_B; `store`, also
$FLOWRATE_STORE) and a good result file (`result`, run RUN_FILE). The set-ups here damage,
replace or add to those: stores, result files, datasets, special files (user problem files:
tests/integration/hostile/problems.py).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from factories import make_result
from flowrate.cli.main import main
from flowrate.results.store import Store
from hostile.case import RUN_A, RUN_B, RUN_FILE, Setup, Workspace


def make_templates(folder: Path) -> dict[str, Path]:
    """The good store, result file and dataset every workspace copies (made once per session)."""
    folder.mkdir(parents=True, exist_ok=True)
    store = folder / "flowrate.db"
    with Store(store) as opened:
        opened.add(make_result(run_id=RUN_A, created_at="2026-11-20T10:00:00+00:00"), ["nightly"])
        opened.add(
            make_result(run_id=RUN_B, precision="bf16", created_at="2026-11-21T10:00:00+00:00"), ["cpu"]
        )
    result = folder / "result.json"
    result.write_text(make_result(run_id=RUN_FILE, batch_size=16).to_json() + "\n")
    data = folder / "data"
    try:
        main(
            [
                "data",
                "make",
                "-p",
                "fc_mnist",
                "--size",
                "debug",
                "--samples",
                "64",
                "--shards",
                "2",
                "-o",
                str(data),
            ]
        )
    except SystemExit as done:
        assert not done.code, "could not make the template dataset"
    return {"store": store, "result": result, "data": data}


def base(ws: Workspace) -> None:
    store = ws.path("store", "store/flowrate.db")
    store.parent.mkdir()
    shutil.copyfile(ws.templates["store"], store)
    shutil.copyfile(ws.templates["result"], ws.path("result", "result.json"))
    ws.env["FLOWRATE_STORE"] = str(store)


def good_result() -> dict[str, Any]:
    return json.loads(make_result(run_id=RUN_FILE, batch_size=16).to_json())


# --- result files ---------------------------------------------------------------------------------


def result_file(
    name: str, change: Callable[[dict[str, Any]], Any] | None = None, raw: bytes | None = None
) -> Setup:
    """NAME.json ({NAME} in argv): raw bytes, or the good result with ``change`` applied.

    ``change`` edits the record in place; what it returns, when not None, is written instead.
    Written with allow_nan, as flowrate writes (NaN and Infinity survive).
    """

    def setup(ws: Workspace) -> None:
        path = ws.path(name, f"{name}.json")
        if raw is not None:
            path.write_bytes(raw)
            return
        record = good_result()
        replaced = change(record) if change else None
        path.write_text(json.dumps(record if replaced is None else replaced, allow_nan=True))

    return setup


def summary(**values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda record: record["summary"].update(values)


def field(**values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda record: record.update(values)


def without(key: str) -> Callable[[dict[str, Any]], None]:
    def remove(record: dict[str, Any]) -> None:
        record.pop(key)  # returns nothing: result_file writes what a change returns instead

    return remove


def jsonl(name: str, *records: dict[str, Any] | str) -> Setup:
    """NAME.jsonl, an export: dicts as JSON lines, strings as raw lines."""

    def setup(ws: Workspace) -> None:
        lines = [r if isinstance(r, str) else json.dumps(r, allow_nan=True) for r in records]
        ws.path(name, f"{name}.jsonl").write_text("\n".join(lines) + "\n")

    return setup


def record(run_id: str, **summary_values: Any) -> dict[str, Any]:
    data = good_result()
    data["run_id"] = run_id
    data["summary"].update(summary_values)
    return data


# --- stores ---------------------------------------------------------------------------------------


def store_bytes(data: bytes) -> Setup:
    def setup(ws: Workspace) -> None:
        ws.paths["store"].write_bytes(data)

    return setup


def foreign_sqlite(ws: Workspace) -> None:
    """Another application's SQLite database where the store should be."""
    path = ws.paths["store"]
    path.unlink()
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE songs (title TEXT, seconds REAL)")
    db.execute("INSERT INTO songs VALUES ('so what', 562)")
    db.commit()
    db.close()


def newer_store(ws: Workspace) -> None:
    db = sqlite3.connect(ws.paths["store"])
    db.execute("PRAGMA user_version = 99")
    db.close()


def truncated_store(ws: Workspace) -> None:
    """The store's header and first page intact, the rest gone: it opens, then reads fail."""
    path = ws.paths["store"]
    path.write_bytes(path.read_bytes()[:4096])


def bad_row(run_id: str, change: Callable[[dict[str, Any]], None], column: Any = None) -> Setup:
    """Damage a stored run's JSON (as an old flowrate's import let through); optionally its
    samples_per_sec column too."""

    def setup(ws: Workspace) -> None:
        db = sqlite3.connect(ws.paths["store"])
        (text,) = db.execute("SELECT result_json FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        data = json.loads(text)
        change(data)
        db.execute(
            "UPDATE runs SET result_json = ? WHERE run_id = ?", (json.dumps(data, allow_nan=True), run_id)
        )
        if column is not None:
            db.execute("UPDATE runs SET samples_per_sec = ? WHERE run_id = ?", (column, run_id))
        db.commit()
        db.close()

    return setup


def unreadable_row(ws: Workspace) -> None:
    db = sqlite3.connect(ws.paths["store"])
    db.execute("UPDATE runs SET result_json = ? WHERE run_id = ?", ("{not json", RUN_B))
    db.commit()
    db.close()


def sweep_named(name: str) -> Setup:
    """A recorded sweep called ``name`` over another grid than the cases ask for."""

    def setup(ws: Workspace) -> None:
        with Store(ws.paths["store"]) as opened:
            opened.open_sweep(
                "5eed5eed5eed", name, {"base": {"problem": "fc_mnist"}, "grid": {"batch_size": [64, 128]}}
            )

    return setup


def read_only_store(ws: Workspace) -> None:
    ws.paths["store"].chmod(0o444)


def read_only_store_folder(ws: Workspace) -> None:
    ws.paths["store"].parent.chmod(0o555)


# --- datasets -------------------------------------------------------------------------------------


def dataset(change: Callable[[Path], None] | None = None) -> Setup:
    """A copy of the template fc_mnist/debug dataset (64 samples, 2 shards) at `data`, then ``change``."""

    def setup(ws: Workspace) -> None:
        folder = ws.path("data", "data")
        shutil.copytree(ws.templates["data"], folder)
        if change:
            change(folder)

    return setup


def index_edit(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        index = json.loads((folder / "index.json").read_text())
        change(index)
        (folder / "index.json").write_text(json.dumps(index))

    return edit


def index_bytes(data: bytes) -> Callable[[Path], None]:
    return lambda folder: (folder / "index.json").write_bytes(data)


def shard_named(name: str) -> Callable[[dict[str, Any]], None]:
    def change(index: dict[str, Any]) -> None:
        index["shards"][0]["file"] = name

    return change


def flip_byte(folder: Path) -> None:
    shard = folder / "shard-00000.bin"
    data = bytearray(shard.read_bytes())
    data[100] ^= 0xFF
    shard.write_bytes(bytes(data))


def truncate_shard(folder: Path) -> None:
    shard = folder / "shard-00001.bin"
    shard.write_bytes(shard.read_bytes()[:500])


# --- special files --------------------------------------------------------------------------------


def named(name: str, relative: str) -> Setup:
    """Give a path a name (for argv and watch) without making anything there."""
    return lambda ws: ws.paths.__setitem__(name, ws.root / relative)


def symlink(name: str, target: str, content: str | None = "old\n", file: str | None = None) -> Setup:
    """`name` (or `file`) -> `target`, in the workspace; the target holds ``content`` (None: dangling)."""

    def setup(ws: Workspace) -> None:
        link = ws.path(name, file or name)
        goal = ws.path(f"{name}_target", target)
        goal.parent.mkdir(parents=True, exist_ok=True)
        if content is not None:
            goal.write_text(content)
        link.symlink_to(target)

    return setup


def fifo(name: str, file: str | None = None) -> Setup:
    def setup(ws: Workspace) -> None:
        os.mkfifo(ws.path(name, file or name))
        ws.fifo_readers.append(name)

    return setup


def device_node(name: str, minor: int, file: str | None = None) -> Setup:
    """A private /dev/null (minor 3) or /dev/full (minor 7): the machine's own are never put at
    risk of being replaced (issue 14's `export --out /dev/stdout` broke it for everyone)."""

    def setup(ws: Workspace) -> None:
        path = ws.path(name, file or name)
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
        except PermissionError:  # not root: the real device, which this user cannot replace
            ws.paths[name] = Path("/dev/null" if minor == 3 else "/dev/full")

    return setup


def stdout_link(ws: Workspace) -> None:
    """A private /dev/stdout: a symlink to this process's fd 1."""
    ws.path("stdout_link", "stdout").symlink_to("/proc/self/fd/1")


def folder(name: str, mode: int | None = None, files: tuple[str, ...] = (), file: str | None = None) -> Setup:
    """A folder `name` (or `file`) holding ``files``, then given ``mode``."""

    def setup(ws: Workspace) -> None:
        path = ws.path(name, file or name)
        path.mkdir(parents=True, exist_ok=True)
        for inside in files:
            (path / inside).write_text("x")
        if mode is not None:
            path.chmod(mode)

    return setup


def plain_file(name: str, text: str = "not a folder\n", mode: int | None = None) -> Setup:
    def setup(ws: Workspace) -> None:
        path = ws.path(name, name)
        path.write_text(text)
        if mode is not None:
            path.chmod(mode)

    return setup


def env(**values: str) -> Setup:
    """Environment variables; {placeholders} are the workspace's paths."""

    def setup(ws: Workspace) -> None:
        for key, value in values.items():
            ws.env[key] = value.format(**ws.placeholders())

    return setup


def peaks_file(text: str | bytes) -> Setup:
    def setup(ws: Workspace) -> None:
        path = ws.path("peaks", "peaks.json")
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
        ws.env["FLOWRATE_PEAKS"] = str(path)

    return setup
