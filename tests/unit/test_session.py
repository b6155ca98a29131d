"""flowrate.session around a user's own loop, in one process (two ranks: test_data_parallel.py)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import flowrate
from flowrate.config import RunConfig
from flowrate.errors import ConfigError, FlowrateError
from flowrate.measure.loop import LoopPlan, timed_loop
from flowrate.measure.rate import RateReading
from flowrate.results.schema import IntervalRecord
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
    assert result.problem.name == "blocks" and result.problem.blocks == 2
    assert result.problem.parameters == 16 * 32 + 32 + 32 * 4 + 4
    assert result.problem.settings["optimizer"] == "AdamW(lr=0.01)"
    assert result.config.optimizer == "adamw" and result.config.learning_rate == 0.01
    assert result.summary.timed_steps == 10 == len(result.losses) == result.config.steps
    assert result.batch_size == 8 and result.summary.timed_samples == 80
    s_ = result.summary
    assert s_.samples_per_sec == pytest.approx(s_.timed_samples / s_.timed_duration_s)
    assert result.losses[-1] < result.losses[0]  # the user's optimizer really stepped
    assert result.flops.model_flops_per_sec == pytest.approx(s_.samples_per_sec * 3 * 2 * (16 * 32 + 32 * 4))
    assert result.input is not None and 0 <= result.input.input_bound_share < 1
    assert result.distributed is None
    with Store(results_store) as store:
        (run,) = store.runs()
    assert run.result.run_id == result.run_id and "mine" in run.tags


def test_streaming_the_users_model_computes_the_same_steps() -> None:
    resident = train(store=False).result
    streamed = train("streaming", store=False).result
    assert streamed.losses == pytest.approx(resident.losses, rel=1e-6)
    assert streamed.streaming is not None and streamed.streaming.blocks == 2


def test_steps_stop_the_loader_and_tensorboard_gets_each_sample_point(tmp_path: Path) -> None:
    s = train(steps=4, sample_every=2, store=False, tensorboard=tmp_path / "tb")
    result = s.result
    assert s.done and result.summary.timed_steps == 4 and result.summary.intervals == 2
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    # one value per sample point, at the count of timed steps reached there, equal to the record's
    written = {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}
    assert [step for step, _ in written["avg_samples_per_sec"]] == [2, 4] and len(result.intervals) == 2
    assert {tag: len(values) for tag, values in written.items()} == {tag: 2 for tag in written}
    assert {"local_samples_per_sec", "avg_samples_per_sec", "avg_steps_per_sec", "loss"} <= written.keys()
    float32 = [float(np.float32(i.global_samples_per_sec)) for i in result.intervals]
    assert [value for _, value in written["avg_samples_per_sec"]] == float32
    assert [value for _, value in written["loss"]] == [float(np.float32(i.loss)) for i in result.intervals]


class FakeSteps:
    """Steps that take 0.05 s of fake time each and return known losses, counted from the first."""

    def __init__(self) -> None:
        self.now = 0.0
        self.count = 0

    def clock(self) -> float:
        return self.now

    def step(self, batch: object = None) -> torch.Tensor:
        self.now += 0.05
        self.count += 1
        return torch.tensor(3.0 / self.count)


def reading_of(record: IntervalRecord) -> RateReading:
    """The RateReading an interval's record was made from."""
    return RateReading(
        record.samples,
        record.seconds,
        record.samples_per_sec,
        record.rate_samples_per_sec,
        record.global_samples_per_sec,
        record.elapsed_s,
    )


def test_a_session_measures_its_loop_as_the_timed_loop_does() -> None:
    """The user's loop and `flowrate run`'s, fed the same steps on the same fake clock, give the
    same intervals: one LoopClock measures both."""
    pulled = FakeSteps()
    plan = LoopPlan.from_config(RunConfig(preheat_steps=3, duration_s=1.0))
    record = timed_loop(pulled.step, [(torch.zeros(1),)], 8, lambda: None, plan, clock=pulled.clock)
    pushed = FakeSteps()
    with flowrate.session(
        "fake", mode="infer", preheat_steps=3, duration_s=1.0, store=False, clock=pushed.clock
    ) as s:
        s.model(nn.Linear(16, 4))
        for _ in s.loader(torch.zeros(8, 16) for _ in itertools.count()):
            s.step(pushed.step())
    theirs = [(i.index, i.first_step, i.steps, i.loss, i.reading) for i in record.intervals]
    ours = [(i.index, i.first_step, i.steps, i.loss, reading_of(i)) for i in s.result.intervals]
    assert ours == theirs
    # 0.2 s per interval at 0.05 s a step: 4 steps each, 5 of them fill the second
    assert [(i.first_step, i.steps) for i in s.result.intervals] == [(4 * k, 4) for k in range(5)]
    assert s.result.losses == record.losses and pushed.count == pulled.count == 23
    assert s.result.summary.preheat_s == record.preheat_s and s.result.summary.sample_every_steps == 4


def test_an_inference_loop_counts_steps_without_a_loss() -> None:
    model = Blocks()
    with flowrate.session("infer", mode="infer", preheat_steps=1, sample_every=3, store=False) as s:
        model = s.model(model)
        with torch.inference_mode():
            for x, _ in s.loader(loader(batches=7)):
                model(x)
                s.step()
    assert s.result.summary.timed_steps == 6 and s.result.losses == [] and s.result.summary.intervals == 2
    assert s.result.config.mode == "infer"


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
