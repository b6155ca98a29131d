"""A synthetic grid table in the recorded format (benchmarks/record_grid.py), for the exploration
tests: a CPU transformer's shape (throughput saturating with the batch, threads and compile
helping, bf16 slower on the small size and faster on the larger, memory growing with the batch),
each point jittered, a few out of memory. Its numbers are made up; the real table is measured."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmark_scripts import load_benchmark

# every grid recorded on this project's VM (each names its host, launcher and date)
RECORDED_TABLES = sorted(
    (Path(__file__).parents[2] / "benchmarks" / "data").glob("grid_transformer_cpu*.json")
)


def synthetic_table(seed: int = 7) -> dict[str, Any]:
    rng = random.Random(seed)
    points = []
    duration, startup = 5.0, 2.5
    axes = (["debug", "mini"], ["fp32", "bf16"], [1, 2], [False, True], [1, 2, 4, 8, 16, 32, 64])
    for size, precision, threads, compiled, batch in itertools.product(*axes):
        saturation = batch / (batch + {"debug": 6, "mini": 3}[size])
        rate = {"debug": 900.0, "mini": 180.0}[size] * saturation * (1.75 if threads == 2 else 1.0)
        rate *= {"fp32": 1.0, "bf16": 0.7 if size == "debug" else 1.25}[precision]
        rate *= (1.15 if compiled else 1.0) * rng.uniform(0.93, 1.07)
        activations = {"debug": 2e6, "mini": 9e6}[size] * batch * (0.6 if precision == "bf16" else 1.0)
        memory = ({"debug": 60e6, "mini": 240e6}[size] + activations) * (1.1 if compiled else 1.0)
        memory = memory * rng.uniform(0.98, 1.02) + 150e6
        oom = size == "mini" and batch == 64 and precision == "fp32" and compiled
        params = {
            "batch_size": batch,
            "precision": precision,
            "threads": threads,
            "compile": compiled,
            "size": size,
        }
        points.append(
            {
                "params": params,
                "samples_per_sec": {"mean": rate, "sd": 0.03 * rate, "n": 2},
                "peak_memory_bytes": {"mean": memory, "sd": 0.005 * memory},
                "wall_s": startup + duration + (6.0 if compiled else 0.0) + rng.uniform(0, 0.5),
                "status": "oom" if oom else "done",
            }
        )
    return {
        "problem": "transformer",
        "hardware": "synthetic",
        "command": "tests/unit/explore_grid.py",
        "date": "2026-11-24",
        "duration_s": duration,
        "startup_s": startup,
        "points": points,
    }


def write_table(folder: Path) -> Path:
    path = folder / "grid.json"
    path.write_text(json.dumps(synthetic_table()), encoding="utf-8")
    return path


def benchmark_module() -> ModuleType:
    """benchmarks/explore_efficiency.py, imported."""
    return load_benchmark("explore_efficiency")


def table_point(batch: int, rate: float, wall_s: float) -> dict[str, object]:
    """A recorded grid point: samples/s with a 10% spread, memory growing with the batch."""
    return {
        "params": {"batch_size": batch},
        "samples_per_sec": {"mean": rate, "sd": 0.1 * rate},
        "peak_memory_bytes": {"mean": 1e8 * batch, "sd": None},
        "wall_s": wall_s,
        "status": "done",
    }
