"""benchmarks/estimate_accuracy.py prices each row with a calibration made in the machine's state
at that row (States): a VM that flips between two states is calibrated twice, not once per
flip. The canary and the calibration are the hardware here, replaced by fakes."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from benchmark_scripts import load_benchmark


@pytest.fixture(scope="module")
def accuracy() -> ModuleType:
    return load_benchmark("estimate_accuracy")


def _states(
    accuracy: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    directory: Path,
    canary_after: list[float],
    **options: object,
) -> tuple[Any, list[str]]:
    """States whose n-th calibration leaves the canary at canary_after[n]; the paths calibrated."""
    made: list[str] = []

    def calibrate_here(args: argparse.Namespace, path: str) -> float:
        made.append(path)
        Path(path).write_text("{}", encoding="utf-8")
        return canary_after[len(made) - 1]

    monkeypatch.setattr(accuracy, "calibrate_here", calibrate_here)
    args = argparse.Namespace(**{"calibration": None, "max_calibrations": 8, **options})
    return accuracy.States(args, str(directory)), made


def test_two_states_are_calibrated_once_each(
    accuracy: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    states, made = _states(accuracy, monkeypatch, tmp_path, [2.9e-3, 5.0e-3])
    fast = states.for_canary(3.0e-3)
    slow = states.for_canary(4.8e-3)
    # the VM flips back and forth: each reading within 8% of a calibration's canary reuses it
    assert [states.for_canary(t) for t in (3.1e-3, 5.3e-3, 2.8e-3, 4.7e-3)] == [fast, slow, fast, slow]
    assert made == [str(tmp_path / "calibration-0.json"), str(tmp_path / "calibration-1.json")]
    assert (fast.canary_s, slow.canary_s) == (2.9e-3, 5.0e-3)


def test_a_state_between_the_known_ones_is_calibrated(
    accuracy: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    states, made = _states(accuracy, monkeypatch, tmp_path, [3.0e-3, 5.0e-3, 4.0e-3])
    states.for_canary(3.0e-3)
    states.for_canary(5.0e-3)
    middle = states.for_canary(4.0e-3)  # 20% from both
    assert len(made) == 3 and middle.canary_s == 4.0e-3
    assert states.for_canary(3.8e-3) == middle


def test_of_two_calibrations_within_reach_the_nearer_prices_the_row(
    accuracy: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    states, made = _states(accuracy, monkeypatch, tmp_path, [3.0e-3, 3.2e-3])
    low = states.for_canary(3.0e-3)
    high = states.for_canary(3.3e-3)  # 10% from the first: calibrated, its canary then read 3.2 ms
    assert len(made) == 2
    assert states.for_canary(3.12e-3) == high  # 4% from one, 2.5% from the other
    assert states.for_canary(3.05e-3) == low


def test_beyond_the_limit_the_nearest_calibration_prices_the_row(
    accuracy: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    states, made = _states(accuracy, monkeypatch, tmp_path, [3.0e-3, 5.0e-3], max_calibrations=2)
    first, second = states.for_canary(3.0e-3), states.for_canary(5.0e-3)
    assert states.for_canary(3.6e-3) == first
    assert states.for_canary(9.0e-3) == second
    assert len(made) == 2


def test_a_given_calibration_prices_every_row(
    accuracy: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(accuracy, "canary", lambda: 3.0e-3)
    states, made = _states(accuracy, monkeypatch, tmp_path, [], calibration="mine.json")
    for reading in (3.0e-3, 9.0e-3, 1.0e-3):
        assert states.for_canary(reading) == accuracy.State(3.0e-3, "mine.json")
    assert made == []
