"""`flowrate data make`: a problem's synthetic data written as a dataset, so the whole input
pipeline (disk, workers, pinning, copy) can be measured with data a model really takes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from flowrate.data.records import DatasetIndex
from flowrate.data.writer import DatasetWriter
from flowrate.errors import ConfigError, FlowrateError
from flowrate.problems.base import Problem
from flowrate.problems.sample import SampleField

# Stored bytes per chunk of synthetic samples made and written at once.
CHUNK_BYTES = 32 * 2**20


def problem_label(problem: Problem) -> str:
    return f"{problem.name}/{problem.size}"


def problem_about(problem: Problem) -> dict[str, object]:
    """What a dataset records of the problem it was made for."""
    return {"name": problem.name, "size": problem.size, "settings": problem.describe()}


def problem_spec(problem: Problem, flag: str) -> tuple[SampleField, ...]:
    """The problem's sample fields; a problem that reads no datasets is a mistake in ``flag``."""
    try:
        return tuple(problem.sample_spec())
    except FlowrateError as error:
        raise ConfigError(flag, str(error)) from None


def make_dataset(
    problem: Problem,
    directory: str | Path,
    samples: int,
    shards: int,
    *,
    seed: int = 0,
    on_progress: Callable[[int], None] | None = None,
) -> DatasetIndex:
    """Write ``samples`` of the problem's synthetic data (make_batch on the CPU, seeded) into ``shards``."""
    spec = problem_spec(problem, "problem")
    per_chunk = max(1, min(1024, CHUNK_BYTES // max(1, sum(f.record_bytes for f in spec))))
    generator = torch.Generator().manual_seed(seed)
    origin = {
        "source": "synthetic",
        "problem": problem_about(problem),
        "seed": seed,
    }
    cpu = torch.device("cpu")
    with DatasetWriter(directory, spec, samples, shards, origin) as writer:
        while writer.written < samples:
            count = min(per_chunk, samples - writer.written)
            stored = problem.samples_from_batch(problem.make_batch(count, cpu, generator))
            try:
                writer.write({name: tensor.numpy() for name, tensor in stored.items()})
            except ValueError as error:
                raise FlowrateError(
                    f"{problem_label(problem)}: samples_from_batch does not match its sample_spec ({error})"
                ) from None
            if on_progress is not None:
                on_progress(writer.written)
    return writer.finished()
