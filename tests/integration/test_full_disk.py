"""A results store and an --out file on a disk that is full: exit 1, one line saying the disk is
full, the file as it was; a damaged store stays exit 2 with the advice to move it aside.

Each test mounts a small tmpfs of its own (root only: CI runs as root; skipped, saying why,
elsewhere) and fills it with random bytes, so SQLite and flowrate meet the real ENOSPC. The
hostile corpus (test_hostile.py) has no set-up that is undone afterwards, and a mount must be:
the commands run here through its driver and are judged by its checks.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile.case import FAILED, RUN, TINY, USAGE, Case
from hostile.checks import check_outcome, snapshot, store_run_ids
from hostile.drivers import in_process

from factories import make_result
from flowrate.results.store import Store

RUN_A = "aaaa00000001"
DISK_BYTES = 4 << 20


def mounted(tmp_path: Path, options: str) -> Iterator[Path]:
    """A tmpfs of this test's own with the mount ``options``, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root (CI runs as root)")
    if shutil.which("mount") is None:
        pytest.skip("no mount command here")
    folder = tmp_path / "small-disk"
    folder.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """4 MiB of room."""
    yield from mounted(tmp_path, f"size={DISK_BYTES}")


@pytest.fixture
def few_inodes(tmp_path: Path) -> Iterator[Path]:
    """Room for data, but for only a few files."""
    yield from mounted(tmp_path, f"size={DISK_BYTES},nr_inodes=8")


def fill(disk: Path) -> Path:
    """Fill ``disk`` with random bytes until the system says there is no space left."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as out:
        while True:
            try:
                out.write(os.urandom(1 << 16))
            except OSError as error:
                assert error.errno == errno.ENOSPC, error
                return filler


def make_store(path: Path) -> Path:
    with Store(path) as opened:
        opened.add(make_result(run_id=RUN_A), ["before"])
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def judged(
    argv: tuple[str, ...], code: int, says: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    """Run `flowrate ARGV` in this process; the corpus's checks: the exit code, one `error:` line
    holding each of ``says``, no traceback."""
    outcome = in_process(argv, 120.0, capsys)
    problems = check_outcome(Case("full-disk", argv, code, says), outcome, says)
    assert not problems, f"flowrate {' '.join(argv)}: {'; '.join(problems)}\n{outcome.stderr[-1500:]}"


def assert_store_kept(store: Path, before: str, filler: Path) -> None:
    """The store's file byte for byte as it was, intact, and usable again once there is room."""
    assert digest(store) == before
    assert store_run_ids(store) == {RUN_A}  # PRAGMA integrity_check is ok, the run is there
    filler.unlink()
    with Store(store, create=False) as opened:
        assert [run.run_id for run in opened.runs()] == [RUN_A]


def test_a_run_into_a_store_on_a_full_disk_is_exit_1_and_the_store_is_kept(
    small_disk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = make_store(small_disk / "flowrate.db")
    before = digest(store)
    filler = fill(small_disk)
    judged(
        (*RUN, *TINY, "--store", str(store)),
        FAILED,
        (f"the disk holding the results store {store} is full", "nothing recorded in it was lost"),
        capsys,
    )
    assert_store_kept(store, before, filler)


def test_an_import_into_a_store_on_a_full_disk_is_exit_1_and_the_store_is_kept(
    small_disk: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = make_store(small_disk / "flowrate.db")
    result = tmp_path / "result.json"
    result.write_text(make_result(run_id="cccc00000003").to_json())
    before = digest(store)
    filler = fill(small_disk)
    judged(("import", str(result), "--store", str(store)), FAILED, ("is full",), capsys)
    assert_store_kept(store, before, filler)


def test_out_onto_a_full_disk_is_exit_1_and_the_previous_file_is_unchanged(
    small_disk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = small_disk / "result.json"
    out.write_text("the previous result\n")
    before = snapshot(out)
    fill(small_disk)
    judged(
        (*RUN, *TINY, "--out", str(out)),
        FAILED,
        (f"cannot write {out}", "the disk holding it is full", f"{out} is unchanged"),
        capsys,
    )
    assert snapshot(out) == before  # content, mode, and no temporary file left beside it


def test_a_damaged_store_on_the_small_disk_is_still_damaged_not_full(
    small_disk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = make_store(small_disk / "flowrate.db")
    store.write_bytes(store.read_bytes()[:4096])  # its header and first page, the rest gone
    before = snapshot(store)
    judged(("runs", "--store", str(store)), USAGE, ("is damaged", "move it aside"), capsys)
    assert snapshot(store) == before


def test_a_new_store_on_a_disk_with_no_files_left_is_exit_1_before_anything_is_measured(
    few_inodes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    made = 0
    with contextlib.suppress(OSError):  # ENOSPC: every inode is used
        while True:
            (few_inodes / f"file-{made}").touch()
            made += 1
    assert made > 0 and len(os.listdir(few_inodes)) == made
    store = few_inodes / "flowrate.db"
    result = tmp_path / "result.json"
    result.write_text(make_result(run_id="cccc00000003").to_json())
    judged(
        ("import", str(result), "--store", str(store)),
        FAILED,
        (f"the disk holding the results store {store} is full",),
        capsys,
    )
    assert not store.exists()
