"""--data on a real GPU: pinned batches, non-blocking copies timed with CUDA events, the analyzer
copying each batch to the device. They run with `pytest -m gpu` on a machine with CUDA."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import flowrate
from flowrate.data.feed import loader_settings, open_dataset
from flowrate.data.make import make_dataset
from flowrate.harness.analyze_input import analyze_input
from flowrate.problems.registry import get_problem

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(("problem", "workers"), [("resnet50", 2), ("transformer", 0)])
def test_a_run_reads_pinned_batches_onto_the_gpu(tmp_path: Path, problem: str, workers: int) -> None:
    make_dataset(get_problem(problem, "debug"), tmp_path / "d", 256, 4)
    result = flowrate.benchmark(
        problem,
        size="debug",
        device="cuda",
        data_dir=str(tmp_path / "d"),
        loader_workers=workers,
        batch_size=16,
        steps=12,
        preheat_steps=2,
        sample_every=3,
    )
    assert result.input is not None and result.input.pinned is True
    assert all(i.input_wait_s is not None and i.input_wait_s > 0 for i in result.intervals)
    assert 0 <= result.input.input_bound_share < 1


def test_the_analyzer_copies_to_the_gpu(tmp_path: Path) -> None:
    problem = get_problem("resnet50", "debug")
    make_dataset(problem, tmp_path / "d", 256, 4)
    config = flowrate.RunConfig(problem="resnet50", size="debug", device="cuda", data_dir=str(tmp_path / "d"))
    device = torch.device("cuda")
    index = open_dataset(str(tmp_path / "d"), problem)
    analysis = analyze_input(
        tmp_path / "d",
        index,
        loader_settings(config, 16, device),
        device,
        1000.0,
        "given",
        configurations=[(0, None), (2, 2)],
        seconds=0.2,
    )
    assert [(p.workers, p.prefetch) for p in analysis.points] == [(0, None), (2, 2)]
    for p in analysis.points:  # full batches of 16 from an endless stream, at least 8 of them
        assert p.batches >= 8 and p.seconds >= 0.2
        assert p.samples_per_sec == pytest.approx(16 * p.batches / p.seconds)
    assert analysis.device == "cuda"
