"""`flowrate analyze-input` from a run configuration: the dataset and loader it names, the model's
rate to compare the pipeline with, and the loader configurations to try. flowrate.harness.
analyze_input measures them and predicts each one's input-bound share; ``advise`` runs it all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import torch

from flowrate.config import AUTO, RunConfig, positive_ints
from flowrate.data.feed import loader_settings, open_dataset
from flowrate.data.loader import LoaderSettings
from flowrate.data.records import DatasetIndex
from flowrate.errors import ConfigError
from flowrate.harness.analyze_input import (
    InputAnalysis,
    PipelinePoint,
    analyze_input,
    candidates,
    consumption_rate,
    default_max_workers,
    estimated_rate,
)
from flowrate.measure.device import resolve_device
from flowrate.problems.base import Problem


@dataclass(frozen=True)
class InputSetup:
    """What the analysis reads and for which model: the dataset, the loader and the device."""

    config: RunConfig
    problem: Problem
    data_dir: str
    batch_size: int
    device: torch.device
    index: DatasetIndex
    settings: LoaderSettings  # everything but the workers and prefetch, which the analysis varies


def parse_depths(text: str) -> list[int]:
    """'2,4' -> [2, 4]: distinct positive prefetch depths, ascending."""
    return positive_ints(text, "prefetch_depths", "2,4")


def require_dataset(data_dir: str | None) -> str:
    if data_dir is None:
        raise ConfigError("data", "analyze-input needs the dataset: give --data DIR")
    return data_dir


def set_up(config: RunConfig, problem: Problem, sample_cost_s: float = 0.0) -> InputSetup:
    """The dataset of ``config.data_dir`` (checked against ``problem``) and its loader settings;
    ``sample_cost_s`` adds an artificial cost per sample (tests)."""
    data_dir = require_dataset(config.data_dir)
    if config.batch_size == AUTO:
        raise ConfigError("batch_size", "analyze-input needs a fixed --batch-size")
    batch_size = int(config.batch_size or problem.default_batch_size)
    device = resolve_device(config.device)
    index = open_dataset(data_dir, problem)
    settings = replace(loader_settings(config, batch_size, device), sample_cost_s=sample_cost_s)
    return InputSetup(config, problem, data_dir, batch_size, device, index, settings)


def model_rate(
    setup: InputSetup,
    given: float | None = None,
    target: str | None = None,
    on_measure: Callable[[], None] | None = None,
) -> tuple[float, str]:
    """The model's samples/s and how it was found: ``given``, the cost model's estimate on
    ``target``, or measured by a short synthetic run (``on_measure`` is told first)."""
    if given is not None and target is not None:
        raise ConfigError("target", "give --target or --consumption-rate, not both")
    if given is not None:
        return given, "given (--consumption-rate)"
    if target is not None:
        return estimated_rate(setup.config, setup.problem, setup.batch_size, target)
    if on_measure is not None:
        on_measure()
    return consumption_rate(setup.config, setup.problem)


def configurations(
    setup: InputSetup, max_workers: int | None, depths: Sequence[int]
) -> list[tuple[int, int | None]]:
    """The (workers, prefetch) pairs to try: up to ``max_workers`` (by default as many as the cores
    allow), never more workers than shards."""
    shards = len(setup.index.shards)
    limit = default_max_workers(shards, 1) if max_workers is None else max_workers
    if limit > shards:
        raise ConfigError("max_workers", f"{setup.data_dir} has {shards} shards: at most that many workers")
    return candidates(limit, depths)


def measure(
    setup: InputSetup,
    rate: float,
    source: str,
    tried: Sequence[tuple[int, int | None]],
    seconds_each: float,
    on_point: Callable[[PipelinePoint], None] | None = None,
) -> InputAnalysis:
    """Time the pipeline alone at each configuration against the model's ``rate``."""
    return analyze_input(
        setup.data_dir,
        setup.index,
        setup.settings,
        setup.device,
        rate,
        source,
        configurations=tried,
        seconds=seconds_each,
        on_point=on_point,
    )


class AdviceListener(Protocol):
    """Told as the analysis goes: before the model's rate is measured, once the plan is known, and
    after each configuration is timed."""

    def measuring(self, setup: InputSetup) -> None: ...

    def planned(self, rate: float, source: str, configurations: int) -> None: ...

    def point(self, point: PipelinePoint) -> None: ...


def advise(
    setup: InputSetup,
    listener: AdviceListener,
    given_rate: float | None = None,
    target: str | None = None,
    max_workers: int | None = None,
    depths: Sequence[int] = (2,),
    seconds_each: float = 2.0,
) -> InputAnalysis:
    """The whole analysis: the model's rate (given, estimated on ``target`` or measured), the
    configurations to try, and each one timed against that rate."""
    rate, source = model_rate(setup, given_rate, target, on_measure=lambda: listener.measuring(setup))
    tried = configurations(setup, max_workers, depths)
    listener.planned(rate, source, len(tried))
    return measure(setup, rate, source, tried, seconds_each, on_point=listener.point)
