"""--batch-size auto on a CPU: each trial step is held to the host memory available, so a batch
too large fails its allocation (and the search halves) instead of the kernel killing the process."""

from __future__ import annotations

import resource
from types import SimpleNamespace

import psutil
import pytest
import torch

from flowrate.measure import memory
from flowrate.measure.device import is_out_of_memory

GIB = 1 << 30


def _available(monkeypatch: pytest.MonkeyPatch, nbytes: int) -> None:
    real = psutil.virtual_memory()
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(available=nbytes, total=real.total))


def test_an_allocation_past_the_available_memory_fails_as_out_of_memory_and_the_limit_comes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = resource.getrlimit(resource.RLIMIT_DATA)
    _available(monkeypatch, GIB)
    with memory.host_memory_cap(torch.device("cpu")) as headroom:
        assert headroom == int(GIB * memory.HOST_TRIAL_SHARE)
        small = torch.ones(1 << 20)  # 4 MiB: well within
        with pytest.raises(RuntimeError) as raised:
            torch.ones(2 * GIB // 4)  # 2 GiB of float32: past it
        assert is_out_of_memory(raised.value)
    assert resource.getrlimit(resource.RLIMIT_DATA) == before
    assert torch.ones(2 * GIB // 4).numel() == 2 * GIB // 4  # the same allocation, once lifted
    assert small.sum().item() == 1 << 20


def test_no_cap_on_a_gpu_or_above_a_lower_limit_already_set(monkeypatch: pytest.MonkeyPatch) -> None:
    _available(monkeypatch, GIB)
    with memory.host_memory_cap(torch.device("meta")) as headroom:
        assert headroom is None
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    monkeypatch.setattr(resource, "getrlimit", lambda _: (1 << 20, hard))  # lower than any cap
    with memory.host_memory_cap(torch.device("cpu")) as headroom:
        assert headroom is None


def test_the_batch_search_halves_within_the_cap_and_says_so(
    monkeypatch: pytest.MonkeyPatch, run_cli, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    import json

    _available(monkeypatch, 400 << 20)  # 360 MiB for a trial: batch 4096 of transformer/debug is over
    out = tmp_path / "auto.json"
    outcome = run_cli(
        "run", "-p", "transformer", "--size", "debug", "--batch-size", "auto", "--max-batch-size", "4096",
        "--preheat", "1", "--steps", "2", "--no-store", "--out", str(out),
    )  # fmt: skip
    assert outcome.code == 0, outcome.stderr
    record = json.loads(out.read_text())
    tried = record["batch_size_search"]
    assert tried[0] == {"batch_size": 4096, "fits": False} and tried[-1]["fits"]
    assert record["batch_size"] == tried[-1]["batch_size"] < 4096
    assert any("held to the 360 MiB of host memory available" in w for w in record["warnings"])
