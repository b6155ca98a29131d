"""Which probe follows this machine's changes of speed? Two canaries beside a framework-bound model.

Round after round for --seconds, in one process: the canary that `estimate_accuracy.py` used until
the thirteenth session (two 32-wide linears, GELU and LayerNorm, fused AdamW, batch 4: 12 KB of
weights), the one it uses now (a 2-layer transformer 96 wide, about 2 MB with AdamW's state:
estimate_accuracy.canary), and transformer/debug's training step at batch 4 (the zoo's model,
fused AdamW), each the median of 5 blocks. A canary is worth its name when its time moves with
the model's: the script prints each round, then the rounds' spread per probe and how much each
canary's time moves when the model's moves by more than 25% against its median.

    python benchmarks/canary_tracking.py --seconds 120
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from estimate_accuracy import canary, median_step_time
from flowrate.problems.registry import get_problem
from record import Figure, record  # beside this script


def small_canary_step() -> Callable[[], None]:
    """The earlier canary: two 32-wide linears, GELU and LayerNorm, fused AdamW, batch 4."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 32))
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    x = torch.randn(4, 32)

    def step() -> None:
        model(x).sum().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def model_step() -> Callable[[], None]:
    """transformer/debug's training step at batch 4 with fused AdamW."""
    problem = get_problem("transformer", "debug", {})
    torch.manual_seed(0)
    model = problem.build_model()
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    batch = problem.make_batch(4, torch.device("cpu"), torch.Generator().manual_seed(0))

    def step() -> None:
        problem.loss(model, batch).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="how long to go round")
    args = parser.parse_args()
    small, model = small_canary_step(), model_step()
    rounds: list[tuple[float, float, float]] = []
    start = time.monotonic()
    print(f"{'s':>6} {'small canary ms':>16} {'canary ms':>10} {'transformer/debug ms':>21}")
    while time.monotonic() - start < args.seconds:
        row = (median_step_time(small, 50, warm_up=3), canary(), median_step_time(model, 40, warm_up=3))
        rounds.append(row)
        small_ms, canary_ms, model_ms = (seconds * 1e3 for seconds in row)
        elapsed = time.monotonic() - start
        print(f"{elapsed:6.1f} {small_ms:16.3f} {canary_ms:10.3f} {model_ms:21.3f}", flush=True)
    medians = [statistics.median(column) for column in zip(*rounds, strict=True)]
    names = ("small canary", "canary", "transformer/debug")
    figures: list[Figure] = []
    for name, median, column in zip(names, medians, zip(*rounds, strict=True), strict=True):
        low, high = min(column) / median, max(column) / median
        print(f"{name}: median {median * 1e3:.3f} ms, {low:.2f}-{high:.2f} of it")
        spread = f"{low:.2f}-{high:.2f} of the median over {len(rounds)} rounds"
        figures.append(Figure(f"{name} step", round(median * 1e3, 4), "ms", note=spread))
    slow = [row for row in rounds if row[2] > 1.25 * medians[2]]
    if not slow:
        print("the model never ran more than 25% slower than its median: nothing to follow")
    for index, name in ((0, "small canary"), (1, "canary")) if slow else ():
        moved = statistics.median(row[index] / medians[index] for row in slow)
        model_moved = statistics.median(row[2] / medians[2] for row in slow)
        print(
            f"in the {len(slow)} rounds where the model ran x{model_moved:.2f} its median, "
            f"the {name} ran x{moved:.2f} its own"
        )
        note = f"in the {len(slow)} rounds where the model ran x{model_moved:.2f} its median"
        figures.append(Figure(f"{name}'s move with the model's", round(moved, 3), "x its median", note=note))
    record("canary_tracking", figures, note=f"{args.seconds:g} s of rounds")


if __name__ == "__main__":
    main()
