"""write_atomic: regular files replaced atomically; symlinks, FIFOs and devices written through, never
replaced; "-" is stdout; every failure one FlowrateError line naming the path."""

from __future__ import annotations

import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from flowrate.errors import EXIT_BAD_INPUT, EXIT_FAILED, FlowrateError
from flowrate.io import write_atomic


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_new_file_gets_the_content_and_the_permissions_open_would_give(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "er" / "result.json"
    write_atomic(target, "{}\n")
    assert target.read_text() == "{}\n"
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~mask
    assert leftovers(target.parent) == []


def test_a_file_is_replaced_whole_and_keeps_its_permissions(tmp_path: Path) -> None:
    target = tmp_path / "result.json"
    target.write_text("old and longer than the new content\n")
    target.chmod(0o640)
    write_atomic(target, b"new\n")
    assert target.read_bytes() == b"new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert leftovers(tmp_path) == []


def test_a_symlink_stays_a_symlink_and_its_target_gets_the_content(tmp_path: Path) -> None:
    (tmp_path / "run-42.json").write_text("old\n")
    link = tmp_path / "latest.json"
    link.symlink_to("run-42.json")
    chain = tmp_path / "chain.json"
    chain.symlink_to(link)
    write_atomic(chain, "new\n")
    assert link.is_symlink() and os.readlink(link) == "run-42.json"
    assert chain.is_symlink() and os.readlink(chain) == str(link)
    assert (tmp_path / "run-42.json").read_text() == "new\n"
    assert not (tmp_path / "run-42.json").is_symlink()
    assert leftovers(tmp_path) == []


def test_a_dangling_symlink_creates_the_file_it_names(tmp_path: Path) -> None:
    link = tmp_path / "latest.json"
    link.symlink_to(tmp_path / "runs" / "run-43.json")
    write_atomic(link, "fresh\n")
    assert link.is_symlink()
    assert (tmp_path / "runs" / "run-43.json").read_text() == "fresh\n"


def test_a_fifo_is_written_through_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    write_atomic(fifo, "through the pipe\n")
    reader.join(timeout=10)
    assert received == [b"through the pipe\n"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_dev_null_is_written_through_and_stays_a_character_device() -> None:
    write_atomic(Path("/dev/null"), "discarded\n")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_dev_full_is_one_error_line_naming_the_path() -> None:
    with pytest.raises(FlowrateError) as raised:
        write_atomic("/dev/full", "x" * 100_000)
    message = str(raised.value)
    assert message == "cannot write /dev/full: No space left on device"
    assert raised.value.exit_code == EXIT_FAILED  # the disk failed, not the user
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_dash_writes_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    print("before", end=" ")
    write_atomic("-", "text\n")
    write_atomic("-", b"bytes\n")
    assert capsys.readouterr().out == "before text\nbytes\n"


def test_a_directory_is_refused_and_left_alone(tmp_path: Path) -> None:
    (tmp_path / "inside").write_text("kept\n")
    with pytest.raises(FlowrateError, match=f"^cannot write {tmp_path}: it is a directory$") as raised:
        write_atomic(tmp_path, "x")
    assert raised.value.exit_code == EXIT_BAD_INPUT
    assert (tmp_path / "inside").read_text() == "kept\n"


def test_a_socket_is_refused_not_replaced(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        with pytest.raises(FlowrateError, match="it is not a file, FIFO or character device"):
            write_atomic(path, "x")
    assert stat.S_ISSOCK(path.stat().st_mode)


def test_a_failed_rename_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "result.json"
    target.write_text("old\n")

    def refuse(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(FlowrateError) as raised:
        write_atomic(target, "new\n")
    assert str(raised.value) == (
        f"cannot write {target}: No space left on device; the disk holding it is full; {target} is unchanged"
    )
    assert raised.value.exit_code == EXIT_FAILED
    assert target.read_text() == "old\n"
    assert leftovers(tmp_path) == []


def test_a_symlink_loop_is_one_error_line(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(FlowrateError, match=r"^cannot write .*a: Too many levels of symbolic links$"):
        write_atomic(tmp_path / "a", "x")
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()
