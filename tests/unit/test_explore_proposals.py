"""Points an exploration proposes itself: the frontier's unmeasured neighbours, alternating with
the sampler after the initial design, and an unmeasured point at random."""

from __future__ import annotations

import random

import pytest

from flowrate.campaigns.explore import engine as explore
from flowrate.campaigns.explore.engine import Exploration
from flowrate.campaigns.explore.objectives import parse_objectives
from flowrate.campaigns.explore.plan import DONE, Budget, Evaluation, ExploreSpec, Outcome
from flowrate.campaigns.explore.proposals import frontier_neighbour, polishing, unmeasured
from flowrate.campaigns.explore.space import Axis, SearchSpace
from flowrate.campaigns.rungs.ladder import Fidelity, Measured, first_front
from flowrate.results.store import point_key

SPACE = SearchSpace(
    {"threads": 1},
    (
        Axis("batch_size", (1, 2, 4, 8), numeric=True, log2=True),
        Axis("precision", ("bf16", "fp16", "fp32"), numeric=False, log2=False),
        Axis("layers", (1, 2, 3), numeric=True, log2=False),
    ),
)


def test_neighbours_are_one_step_along_one_axis_either_side_or_any_other_listed_value() -> None:
    assert SPACE.neighbours({"batch_size": 2, "precision": "fp16", "layers": 1}) == [
        {"batch_size": 1, "precision": "fp16", "layers": 1},
        {"batch_size": 4, "precision": "fp16", "layers": 1},
        {"batch_size": 2, "precision": "bf16", "layers": 1},
        {"batch_size": 2, "precision": "fp32", "layers": 1},
        {"batch_size": 2, "precision": "fp16", "layers": 2},
    ]
    assert len(SPACE.neighbours({"batch_size": 8, "precision": "fp32", "layers": 3})) == 1 + 2 + 1


def test_after_the_initial_design_every_second_new_configuration_is_a_neighbour() -> None:
    assert [polishing(measured, initial=4) for measured in range(9)] == [
        False, False, False, False, False, True, False, True, False
    ]  # fmt: skip


def test_the_neighbour_comes_from_the_first_frontier_configuration_with_one_unmeasured() -> None:
    best = {"batch_size": 8, "precision": "fp32", "layers": 3}
    second = {"batch_size": 1, "precision": "bf16", "layers": 1}
    taken = {point_key(p) for p in [best, second, *SPACE.neighbours(best)]}
    assert frontier_neighbour(SPACE, [best, second], taken) == {
        "batch_size": 2,
        "precision": "bf16",
        "layers": 1,
    }
    taken |= {point_key(p) for p in SPACE.neighbours(second)}
    assert frontier_neighbour(SPACE, [best, second], taken) is None


def test_an_unmeasured_point_is_drawn_until_the_space_is_measured_whole() -> None:
    small = SearchSpace({}, (Axis("batch_size", (1, 2), numeric=True, log2=True),))
    taken = {point_key({"batch_size": 1})}
    assert unmeasured(small, taken, random.Random(0)) == {"batch_size": 2}
    assert unmeasured(small, taken | {point_key({"batch_size": 2})}, random.Random(0)) is None


class Throughput:
    """An evaluate function with no noise: samples/s rises with the batch and layers, fp32 fastest;
    memory rises with the batch."""

    def __init__(self) -> None:
        self.order: list[dict[str, object]] = []

    def __call__(self, batch: list[Evaluation]) -> list[Outcome]:
        outcomes = []
        for evaluation in batch:
            p = evaluation.params
            self.order.append(p)
            rate = p["batch_size"] * p["layers"] * (2.0 if p["precision"] == "fp32" else 1.0)
            values = {"samples_per_sec": float(rate), "peak_memory_bytes": float(p["batch_size"])}
            outcomes.append(Outcome(DONE, values, {}, 1.0))
        return outcomes


def _explore(sampler: str) -> list[dict[str, object]]:
    objectives = parse_objectives(["samples_per_sec:max", "peak_memory_bytes:min"])
    spec = ExploreSpec(SPACE, objectives, fidelity=Fidelity((1.0,)))
    evaluate = Throughput()
    Exploration(spec, evaluate, budget=Budget(runs=14), seed=5, initial=6, sampler=sampler).run()
    return evaluate.order


def test_a_search_alternates_the_sampler_and_the_frontiers_first_unmeasured_neighbour() -> None:
    order = _explore("tpe")
    assert len({point_key(p) for p in order}) == len(order) == 14
    for at in range(7, 14, 2):  # the 2nd, 4th ... configuration after the initial design of 6
        before = order[:at]
        gains = [Measured(point_key(p), _gains(p), (0.0, 0.0)) for p in before]
        front = sorted(first_front(gains), key=lambda m: -m.gains[0])
        keys = {point_key(p): p for p in before}
        expected = frontier_neighbour(SPACE, [keys[m.key] for m in front], set(keys))
        assert order[at] == expected


def test_random_search_stays_plain_random_search(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def recorded(*args: object) -> None:
        asked.append("neighbour")

    monkeypatch.setattr(explore, "frontier_neighbour", recorded)
    _explore("random")
    assert asked == []
    _explore("tpe")
    assert len(asked) == 4  # the 2nd, 4th, 6th and 8th configurations after the design


def _gains(p: dict[str, object]) -> tuple[float, float]:
    rate = p["batch_size"] * p["layers"] * (2.0 if p["precision"] == "fp32" else 1.0)  # type: ignore[operator]
    return float(rate), -float(p["batch_size"])  # type: ignore[arg-type]
