"""Weight streaming's footprint, read from the storages: the bytes the storages of a model's
parameters hold at every block's forward and backward, resident and streamed (part `footprint`
of benchmarks/streaming.py; runs on any device, the storages are the same on a CPU).

The target: streaming's peak is at most two blocks' weights (the two largest adjacent) plus the
resident blocks'. A short sequence keeps the run quick: the weights do not depend on it.

    python benchmarks/streaming_footprint.py                 # gpt2-medium, bf16, seq 64
    python benchmarks/streaming.py --parts footprint
"""

from __future__ import annotations

import argparse
import gc
import itertools
from typing import Any

import torch
from torch import nn

from flowrate.config import Mode, OptimizerName, Precision
from flowrate.execution.precision import PrecisionPolicy
from flowrate.execution.resident import ResidentExecutor
from flowrate.execution.streaming import StreamingExecutor
from flowrate.problems.registry import get_problem
from record import Figure, Target, record  # beside this script

MB = 1e6


def parameter_bytes(model: nn.Module) -> int:
    """Bytes held by the storages of the model's parameters, each storage once."""
    storages = {}
    for param in model.parameters():
        storage = param.untyped_storage()
        if storage.nbytes():
            storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


def probe(model: nn.Module, blocks: list[nn.Module], readings: list[int]) -> None:
    """Read parameter_bytes at every block's forward and backward (hooks after the executor's)."""

    def at_forward(*_: Any) -> None:
        readings.append(parameter_bytes(model))

    def after_forward(module: nn.Module, args: Any, output: Any) -> None:
        if isinstance(output, torch.Tensor) and output.requires_grad:
            output.register_hook(lambda grad: at_forward())  # the block's backward begins

    for block in blocks:
        block.register_forward_pre_hook(at_forward)
        block.register_forward_hook(after_forward)


def footprint(
    name: str, precision: Precision, seq: int, figures: list[Figure], steps: int = 2
) -> list[list[str]]:
    """The table's rows; each execution's peak appended to ``figures``, against its target."""
    problem = get_problem(name, None, {"seq_len": seq})
    policy = PrecisionPolicy(precision, torch.device("cpu"))
    batch = problem.make_batch(1, torch.device("cpu"), torch.Generator().manual_seed(0))
    rows = []
    for label, resident_blocks in (("resident", None), ("streaming", 0), ("streaming, 2 resident blocks", 2)):
        torch.manual_seed(0)
        model = problem.build_model()
        if resident_blocks is None:
            executor: Any = ResidentExecutor(problem, model, policy, Mode.TRAIN, OptimizerName.ADAMW, 1e-4)
        else:
            executor = StreamingExecutor(
                problem,
                model,
                policy,
                Mode.TRAIN,
                OptimizerName.ADAMW,
                1e-4,
                resident_blocks=resident_blocks,
            )
        readings: list[int] = []
        probe(model, problem.blocks(model), readings)
        for _ in range(steps):
            executor.step(batch)
        between = parameter_bytes(model)
        peak = round(max(readings) / MB, 6)  # to the byte
        if resident_blocks is None:
            target = "—"
            figures.append(Figure(f"{label} peak parameter storage", peak, "MB"))
        else:
            executor.finish()
            streamed = [b for b in executor.blocks if not b.resident]
            sizes = [b.weight_bytes for b in streamed]
            two = max((a + b for a, b in itertools.pairwise(sizes)), default=sum(sizes))
            kept = sum(p.untyped_storage().nbytes() for b in executor.blocks if b.resident for p in b.owned)
            target = f"{(two + kept) / MB:.1f} (2 blocks {two / MB:.1f} + resident {kept / MB:.1f})"
            limit = Target("<=", round((two + kept) / MB, 6))
            note = "two largest adjacent blocks + the resident ones"
            figures.append(Figure(f"{label} peak parameter storage", peak, "MB", limit, note))
        rows.append(
            [label, f"**{max(readings) / MB:.1f}**", f"{between / MB:.1f}", target, str(len(readings))]
        )
        del executor, model
        gc.collect()
    return rows


def footprint_part(name: str = "gpt2-medium", precision: Precision = Precision.BF16, seq: int = 64) -> None:
    figures: list[Figure] = []
    rows = footprint(name, precision, seq, figures)
    header = ["execution", "peak parameter MB", "between steps MB", "target MB (≤)", "readings"]
    print(f"\n## Parameter storage footprint, {name}, {precision.value}, seq {seq}, batch 1 (CPU)\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    record("streaming_footprint", figures, note=f"{name}, {precision.value}, seq {seq}, batch 1, CPU")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--problem", default="gpt2-medium")
    parser.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    parser.add_argument("--seq", type=int, default=64)
    args = parser.parse_args()
    footprint_part(args.problem, Precision.parse(args.precision), args.seq)


if __name__ == "__main__":
    main()
