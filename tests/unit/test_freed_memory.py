"""Host memory a step frees: kept in the process (the default) or released to the OS.

The allocator's behaviour is checked for real, in fresh interpreters: after a 256 MiB tensor is
freed, a process that keeps still holds its pages, one that releases does not."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from flowrate.config import FreedMemory, RunConfig
from flowrate.errors import ConfigError
from flowrate.measure import freed_memory
from flowrate.measure.freed_memory import _Process

_FREE_AND_MEASURE = """
import json, sys, psutil, torch
from flowrate.config import FreedMemory
from flowrate.measure import freed_memory
said = freed_memory.apply(FreedMemory(sys.argv[1]))
before = psutil.Process().memory_info().rss
block = torch.ones(64 * 2**20)  # 256 MiB, touched
del block
after = psutil.Process().memory_info().rss
print(json.dumps({"said": said, "held_mib": (after - before) / 2**20}))
"""

glibc_only = pytest.mark.skipif(not freed_memory.is_glibc(), reason="mallopt is glibc's")


def _freed(setting: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _FREE_AND_MEASURE, setting],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},  # no LD_PRELOAD from the caller's shell
    )
    data: dict[str, object] = json.loads(out.stdout)
    return data


@glibc_only
def test_keep_holds_freed_memory_and_release_gives_it_back() -> None:
    kept, released = _freed("keep"), _freed("release")
    assert kept["said"] == "kept (glibc mallopt: no mmap for large blocks, no trimming)"
    assert isinstance(kept["held_mib"], float) and kept["held_mib"] > 250
    assert str(released["said"]).startswith("released (glibc's default")
    assert isinstance(released["held_mib"], float) and released["held_mib"] < 16


def test_release_after_keep_in_one_process_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_Process, "kept", True)
    with pytest.raises(ConfigError, match="fresh process"):
        freed_memory.apply(FreedMemory.RELEASE)
    assert freed_memory.apply(FreedMemory.KEEP).startswith("kept")  # keeping again is no change


def test_a_preloaded_allocator_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_Process, "kept", False)
    monkeypatch.setenv("LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")
    said = freed_memory.apply(FreedMemory.KEEP)
    assert said == "as jemalloc (LD_PRELOAD) does; flowrate leaves it"
    assert _Process.kept is False


def test_the_setting_is_part_of_the_config() -> None:
    assert RunConfig().freed_memory is FreedMemory.KEEP
    assert RunConfig(freed_memory="RELEASE").to_dict()["freed_memory"] == "release"  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown setting 'forget'; use keep or release"):
        RunConfig(freed_memory="forget")  # type: ignore[arg-type]
