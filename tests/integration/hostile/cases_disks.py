"""Stores on a full disk and stores another process is writing to, through every command that
writes one (run, generate, import, sweep, explore) or writes beside it (report, export).

A full disk is the system failing, not the user: exit 1 and one line saying the disk is full,
the store byte for byte as it was (never "damaged, move it aside"), nothing left on the disk. A
command that only reads still reads. The disk is a 4 MiB tmpfs the case mounts in its workspace
and fills with random bytes, so SQLite and flowrate meet the real ENOSPC; it is unmounted after
the case (Workspace.cleanups). Mounting needs root (CI runs as root): elsewhere the cases skip.

A store another process holds write-locked for a moment is waited for, said in one `warning:`
line, then used: nothing is lost, and a reader is not held up.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys

import pytest

from hostile.case import FAILED, MARKED_RUN, OK, RUN, RUN_A, TINY, Case, Setup, Workspace, combine
from hostile.problems import user_problem

DISK_BYTES = 4 << 20
FULL = "is full"
# How long the other process keeps the store locked: past the notice (2 s), far below the limit.
HELD_S = 3.0
_EXPLORE = ("explore", *RUN[1:], "--device", "cpu", *TINY, "--space", "batch_size=1,2", "--budget", "1")
_GENERATE = ("generate", "-p", "transformer", "--size", "debug", "--prompt-len", "4", "--new-tokens", "2")


def _mount(ws: Workspace) -> None:
    """A 4 MiB tmpfs at `disk`, unmounted when the case ends."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root (CI runs as root)")
    if shutil.which("mount") is None:
        pytest.skip("no mount command here")
    disk = ws.path("disk")
    disk.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    ws.cleanups.append(lambda: subprocess.run(["umount", "--lazy", str(disk)], check=True))


def _fill(ws: Workspace) -> None:
    """Random bytes into `disk` until the system says there is no space left."""
    with open(ws.paths["disk"] / "filler", "wb", buffering=0) as out:
        while True:
            try:
                out.write(os.urandom(1 << 16))
            except OSError as error:
                assert error.errno == errno.ENOSPC, error
                return


def store_on_full_disk(ws: Workspace) -> None:
    """The workspace's store moved onto the small disk ($FLOWRATE_STORE too), then the disk filled."""
    _mount(ws)
    moved = ws.paths["disk"] / "flowrate.db"
    shutil.copyfile(ws.paths["store"], moved)
    ws.paths["store"] = moved
    ws.env["FLOWRATE_STORE"] = str(moved)
    _fill(ws)


def out_on_full_disk(file: str) -> Setup:
    """`out` (``file`` on the small disk) holding a previous file, then the disk filled (the store
    stays where it was)."""

    def setup(ws: Workspace) -> None:
        _mount(ws)
        ws.path("out", f"disk/{file}").write_text("the previous output\n")
        _fill(ws)

    return setup


def _full(label: str, argv: tuple[str, ...], **more: object) -> Case:
    """A writer whose store is on the full disk: exit 1, the disk named full, the store as it was."""
    return Case(
        f"disk-full-{label}",
        argv,
        FAILED,
        (FULL,),
        setup=more.pop("setup", store_on_full_disk),  # type: ignore[arg-type]
        not_says=("damaged", "move it aside"),
        **more,  # type: ignore[arg-type]
    )


def _reads(label: str, argv: tuple[str, ...]) -> Case:
    """A reader of the store on the full disk: it reads, and leaves the store as it was."""
    return Case(f"disk-full-{label}-reads", argv, OK, setup=store_on_full_disk, watch={"store": "same"})


def _out(label: str, argv: tuple[str, ...], file: str) -> Case:
    """--out onto the full disk: exit 1, the previous file unchanged, no temporary file left."""
    return Case(
        f"disk-full-out-{label}",
        (*argv, "--out", "{out}"),
        FAILED,
        (FULL, "{out} is unchanged"),
        setup=out_on_full_disk(file),
        watch={"out": "same"},
    )


def store_held(ws: Workspace) -> None:
    """Another process holds the store's write lock for HELD_S, as a process recording a run does."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "db.execute('BEGIN IMMEDIATE')\n"
            "print('held', flush=True)\n"
            "time.sleep(float(sys.argv[2]))\n"
            "db.execute('ROLLBACK')\n",
            str(ws.paths["store"]),
            str(HELD_S),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"

    def release() -> None:
        holder.kill()
        holder.wait()

    ws.cleanups.append(release)


WAITING = "waiting for the results store"

CASES = [
    # writers: exit 1 and the disk named, the store kept
    _full("run", (*MARKED_RUN,), setup=combine(store_on_full_disk, user_problem)),
    _full("generate", _GENERATE),
    _full("import", ("import", "{result}")),
    _full("explore", _EXPLORE),
    _full("sweep", ("sweep", *RUN[1:], *TINY, "-g", "batch_size=2,4")),
    _full("tagged-run", (*RUN, *TINY, "--tag", "nightly")),
    # readers read
    _reads("runs", ("runs",)),
    _reads("show", ("show", RUN_A)),
    _reads("pareto", ("pareto",)),
    # --out onto the full disk
    _out("run", (*RUN, *TINY, "--no-store"), "result.json"),
    _out("export", ("export",), "runs.jsonl"),
    _out("report", ("report",), "report.html"),
    # a store another process is writing to: waited for, said, then used
    Case(
        "store-held-import-waits",
        ("import", "{result}"),
        OK,
        setup=store_held,
        warns=(WAITING,),
        timeout_s=30,
    ),
    Case(
        "store-held-run-waits",
        (*RUN, *TINY),
        OK,
        setup=store_held,
        timeout_s=60,
    ),
    Case("store-held-runs-reads", ("runs",), OK, setup=store_held, watch={"store": "same"}, timeout_s=30),
]
