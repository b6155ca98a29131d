"""Host memory a step frees: released to the OS (the C library's default, flowrate's) or kept.

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
freed_memory.apply(FreedMemory(sys.argv[1]))
said = freed_memory.describe()
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


def test_release_after_keep_in_one_process_is_kept_and_warned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_Process, "kept", True)
    monkeypatch.setattr(_Process, "asked", FreedMemory.KEEP)
    warning = freed_memory.apply(FreedMemory.RELEASE)
    assert warning == (
        "freed host memory was kept, not released as asked: an earlier run in this process kept it "
        "(--freed-memory keep), which cannot be undone; measure release in a fresh process"
    )
    assert freed_memory.describe() == (
        "kept (an earlier run in this process kept it: glibc mallopt, no mmap for large blocks, no trimming)"
    )
    assert freed_memory.apply(FreedMemory.KEEP) is None  # keeping again is no change, and no warning
    assert freed_memory.describe() == "kept (glibc mallopt: no mmap for large blocks, no trimming)"


def test_release_in_a_process_that_never_kept_is_no_change(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_Process, "kept", False)
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    assert freed_memory.apply(FreedMemory.RELEASE) is None
    assert _Process.kept is False
    if freed_memory.is_glibc():
        assert freed_memory.describe().startswith("released (glibc's default")


RELEASED = "released (glibc's default: large blocks unmapped, the heap trimmed)"
ADVICE = (
    "freed memory released (the C library's default); `--freed-memory keep` may raise samples/s on "
    "CPU (the step's freed memory is reused instead of refaulted; benchmarks/freed_memory.py measures it)"
)


@pytest.mark.parametrize(
    ("asked", "said", "device", "line"),
    [
        ("release", RELEASED, "cpu", ADVICE),
        ("release", RELEASED, "cuda", None),  # never advised on a GPU
        ("keep", freed_memory.KEPT, "cpu", "freed memory kept (--freed-memory keep)"),
        ("keep", freed_memory.KEPT, "cuda", "freed memory kept (--freed-memory keep)"),
        (
            "release",
            freed_memory.KEPT_EARLIER,
            "cpu",
            "freed memory kept (an earlier run in this process kept it; release needs a fresh process)",
        ),
        ("release", "as the C library does (Darwin, not glibc: flowrate cannot keep it)", "cpu", None),
        (
            "release",
            "as jemalloc (LD_PRELOAD) does; flowrate leaves it",
            "cpu",
            "freed memory as jemalloc (LD_PRELOAD) does; flowrate leaves it",
        ),
        ("keep", None, "cpu", None),  # a record from before the setting
    ],
)
def test_the_record_labels_kept_memory_and_advises_keep_only_on_a_cpu(
    asked: str, said: str | None, device: str, line: str | None
) -> None:
    assert freed_memory.label(asked, said, device) == line


def test_a_preloaded_allocator_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_Process, "kept", False)
    monkeypatch.setattr(_Process, "asked", FreedMemory.RELEASE)
    monkeypatch.setenv("LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")
    assert freed_memory.apply(FreedMemory.KEEP) is None
    assert freed_memory.describe() == "as jemalloc (LD_PRELOAD) does; flowrate leaves it"
    assert _Process.kept is False


def test_the_setting_is_part_of_the_config_and_releases_by_default() -> None:
    assert RunConfig().freed_memory is FreedMemory.RELEASE  # what a plain PyTorch process gets
    assert RunConfig(freed_memory="RELEASE").to_dict()["freed_memory"] == "release"  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown setting 'forget'; use keep or release"):
        RunConfig(freed_memory="forget")  # type: ignore[arg-type]


def test_sessions_and_generate_release_by_default_and_take_keep() -> None:
    from flowrate.config import GenerateConfig
    from flowrate.harness.session import Session

    assert Session().config.freed_memory is FreedMemory.RELEASE
    assert Session(freed_memory="keep").config.freed_memory is FreedMemory.KEEP
    assert GenerateConfig().freed_memory is FreedMemory.RELEASE
    assert GenerateConfig(freed_memory="keep").freed_memory is FreedMemory.KEEP  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown setting 'forget'"):
        GenerateConfig(freed_memory="forget")  # type: ignore[arg-type]


def test_a_generation_says_its_policy_as_a_run_does() -> None:
    from pathlib import Path

    from flowrate.cli.generate_text import generation_rows
    from flowrate.results.schema import Result

    record = json.loads((Path(__file__).parents[1] / "fixtures/records/v6-generate.json").read_text())
    kept = Result.from_dict(record)  # generate kept freed memory before release became the default
    assert ("host memory", "freed memory kept (--freed-memory keep)") in generation_rows(kept)
    record["config"]["freed_memory"] = "release"
    record["environment"]["freed_memory"] = RELEASED
    released = dict(generation_rows(Result.from_dict(record)))
    assert released["host memory"] == ADVICE  # the fixture ran on a CPU
