"""on_device: the current CUDA device and --device-memory-limit set for a run and put back after,
checked against a fake torch.cuda that records what it is asked."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from flowrate.measure.device import on_device


class FakeCuda:
    """The torch.cuda calls on_device makes, on a machine whose current device is cuda:0."""

    def __init__(self) -> None:
        self.current = 0
        self.fraction = {0: 1.0, 1: 1.0, 2: 0.5}
        self.calls: list[tuple[Any, ...]] = []

    def current_device(self) -> int:
        return self.current

    def set_device(self, device: torch.device | int) -> None:
        self.current = device.index if isinstance(device, torch.device) else device
        self.calls.append(("set_device", self.current))

    def get_per_process_memory_fraction(self, device: torch.device) -> float:
        return self.fraction[device.index]

    def set_per_process_memory_fraction(self, fraction: float, device: torch.device) -> None:
        self.fraction[device.index] = fraction
        self.calls.append(("fraction", fraction, device.index))

    def empty_cache(self) -> None:
        self.calls.append(("empty_cache",))


def test_a_run_on_cuda_1_makes_it_current_and_puts_cuda_0_back() -> None:
    cuda = FakeCuda()
    with on_device(torch.device("cuda", 1), cuda=cuda):
        assert cuda.current == 1  # argument-less events and synchronize() act on the run's GPU
    assert cuda.current == 0
    assert cuda.calls == [("set_device", 1), ("set_device", 0)]


def test_the_memory_cap_is_lifted_to_what_it_was_after_the_run() -> None:
    cuda = FakeCuda()
    with on_device(torch.device("cuda", 2), memory_fraction=0.25, cuda=cuda):
        assert cuda.fraction[2] == 0.25
    assert cuda.fraction == {0: 1.0, 1: 1.0, 2: 0.5}  # the earlier cap, not none: what it was
    assert cuda.calls == [
        ("set_device", 2),
        ("empty_cache",),
        ("fraction", 0.25, 2),
        ("fraction", 0.5, 2),
        ("set_device", 0),
    ]


def test_both_are_put_back_when_the_run_fails() -> None:
    cuda = FakeCuda()
    with (
        pytest.raises(RuntimeError, match="out of memory"),
        on_device(torch.device("cuda", 1), 0.5, cuda=cuda),
    ):
        raise RuntimeError("CUDA out of memory")
    assert cuda.current == 0 and cuda.fraction[1] == 1.0


def test_a_cpu_run_touches_no_cuda_state() -> None:
    cuda = FakeCuda()
    with on_device(torch.device("cpu"), cuda=cuda):
        pass
    assert cuda.calls == []
