"""flowrate.session around a user's own loop, in one process (two ranks: test_data_parallel.py)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import flowrate
from flowrate.errors import ConfigError, FlowrateError
from flowrate.results.store import Store


class Blocks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(16, 32), nn.ReLU()), nn.Linear(32, 4)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def loader(batches: int = 12, batch: int = 8) -> DataLoader[tuple[torch.Tensor, ...]]:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(batches * batch, 16, generator=generator)
    return DataLoader(TensorDataset(x, x[:, :4].argmax(1)), batch_size=batch)  # a learnable task


def train(execution: str = "resident", **options: object) -> flowrate.Session:
    torch.manual_seed(0)
    model = Blocks()
    with flowrate.session("blocks", execution=execution, preheat_steps=2, **options) as s:  # type: ignore[arg-type]
        model = s.model(model)
        s.optimizer(torch.optim.AdamW(model.parameters(), lr=1e-2))
        for x, y in s.loader(loader()):
            s.step(F.cross_entropy(model(x), y))
    return s


def test_a_loop_is_measured_and_recorded(results_store: Path) -> None:
    s = train(tags=["mine"], flops_per_sample=2 * (16 * 32 + 32 * 4))
    result = s.result
    assert result.problem["name"] == "blocks" and result.problem["blocks"] == 2
    assert result.problem["parameters"] == 16 * 32 + 32 + 32 * 4 + 4
    assert result.problem["settings"]["optimizer"] == "AdamW(lr=0.01)"
    assert result.config["optimizer"] == "adamw" and result.config["learning_rate"] == 0.01
    assert result.summary.timed_steps == 10 == len(result.losses) == result.config["steps"]
    assert result.batch_size == 8 and result.summary.timed_samples == 80
    s_ = result.summary
    assert s_.samples_per_sec == pytest.approx(s_.timed_samples / s_.timed_duration_s)
    assert result.losses[-1] < result.losses[0]  # the user's optimizer really stepped
    assert result.flops["model_flops_per_sec"] == pytest.approx(
        s_.samples_per_sec * 3 * 2 * (16 * 32 + 32 * 4)
    )
    assert result.input is not None and 0 <= result.input["input_bound_share"] < 1
    assert result.distributed is None
    with Store(results_store) as store:
        (run,) = store.runs()
    assert run.result.run_id == result.run_id and "mine" in run.tags


def test_streaming_the_users_model_computes_the_same_steps() -> None:
    resident = train(store=False).result
    streamed = train("streaming", store=False).result
    assert streamed.losses == pytest.approx(resident.losses, rel=1e-6)
    assert streamed.streaming is not None and streamed.streaming["blocks"] == 2


def test_steps_stop_the_loader_and_tensorboard_gets_each_sample_point(tmp_path: Path) -> None:
    s = train(steps=4, sample_every=2, store=False, tensorboard=tmp_path / "tb")
    assert s.done and s.result.summary.timed_steps == 4 and s.result.summary.intervals == 2
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))


def test_an_inference_loop_counts_steps_without_a_loss() -> None:
    model = Blocks()
    with flowrate.session("infer", mode="infer", preheat_steps=1, sample_every=3, store=False) as s:
        model = s.model(model)
        with torch.inference_mode():
            for x, _ in s.loader(loader(batches=7)):
                model(x)
                s.step()
    assert s.result.summary.timed_steps == 6 and s.result.losses == [] and s.result.summary.intervals == 2
    assert s.result.config["mode"] == "infer"


def batches() -> Iterator[torch.Tensor]:
    return (torch.randn(8, 16) for _ in itertools.count())


def test_mistakes_say_what_to_do() -> None:
    first = r"call s\.optimizer\(optimizer\) before the first s\.step"
    with pytest.raises(FlowrateError, match=first), flowrate.session(store=False) as s:
        model = s.model(Blocks())
        s.step(model(torch.randn(2, 16)).sum(), samples=2)
    with pytest.raises(FlowrateError, match="needs samples=N"), flowrate.session(store=False) as s:
        model = s.model(Blocks())
        s.optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
        s.step(model(torch.randn(2, 16)).sum())
    with (
        pytest.raises(FlowrateError, match="none timed: the first 5 are preheat"),
        flowrate.session(store=False) as s,
    ):
        model = s.model(Blocks())
        s.optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
        for x in itertools.islice(batches(), 3):
            s.step(model(x).sum(), samples=8)
    with pytest.raises(FlowrateError, match="the session's result exists once"):
        _ = flowrate.Session().result
    with pytest.raises(ConfigError, match="a session needs 1 or more"):
        flowrate.session(preheat_steps=0)
    with pytest.raises(ConfigError, match="unknown execution mode"):
        flowrate.session(execution="magic")
