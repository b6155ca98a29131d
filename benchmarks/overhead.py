"""How much does flowrate's harness cost? flowrate against a minimal hand-written loop.

The same model, batch, precision and optimizer run through `flowrate.benchmark` and through a
hand loop in the spirit of nanoGPT's bench.py (burn in, then time N steps, synchronize once).
The two alternate in ABBA order, in one process, for several rounds (benchmarks/side_by_side.py);
the script prints each side's median samples/s and the ratio of the means flowrate / hand loop
with its 95% interval. Target: >= 0.98.

    python benchmarks/overhead.py                  # fc_mnist and transformer/mini, 7 rounds
    python benchmarks/overhead.py --rounds 3 --seconds 1
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial

import torch
import torch.nn.functional as F

import flowrate
from flowrate.config import OptimizerName
from flowrate.execution.resident import make_optimizer
from flowrate.problems.registry import get_problem
from record import Figure, Target, record  # beside this script
from side_by_side import side_by_side

CASES = {
    # name: (problem, size, batch size)
    "fc_mnist": ("fc_mnist", "default", 128),
    "transformer/mini": ("transformer", "mini", 8),
}
TARGET = 0.98


def hand_loop(problem_name: str, size: str, batch_size: int, steps: int, preheat: int) -> float:
    """nanoGPT-style: plain model, plain AdamW, one sync at the end. Returns samples/s."""
    problem = get_problem(problem_name, size)
    device = torch.device("cpu")
    torch.manual_seed(0)
    model = problem.build_model()
    model.train()
    # the same AdamW settings as flowrate's default run
    optimizer = make_optimizer(OptimizerName.ADAMW, list(model.parameters()), 1e-4, device)
    generator = torch.Generator(device=device).manual_seed(0)
    batches = [problem.make_batch(batch_size, device, generator) for _ in range(2)]

    def step(inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = model(inputs)
        loss = F.cross_entropy(logits.flatten(0, -2), targets.flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    for i in range(preheat):
        step(*batches[i % 2])
    start = time.perf_counter()
    for i in range(steps):
        loss = step(*batches[i % 2])
    loss.item()  # synchronize (a no-op wait on the CPU, a real one on a GPU)
    return steps * batch_size / (time.perf_counter() - start)


def flowrate_run(problem_name: str, size: str, batch_size: int, steps: int, preheat: int) -> float:
    result = flowrate.benchmark(
        problem_name, size=size, batch_size=batch_size, steps=steps, preheat_steps=preheat, device="cpu"
    )
    return result.summary.samples_per_sec


def steps_for(problem_name: str, size: str, batch_size: int, seconds: float) -> int:
    """Enough steps for about ``seconds`` of timed work, from a short calibration run."""
    rate = hand_loop(problem_name, size, batch_size, steps=5, preheat=2)
    return max(10, round(seconds * rate / batch_size))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per side per round")
    parser.add_argument("--preheat", type=int, default=5)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, flowrate {flowrate.__version__}")
    failed = False
    figures: list[Figure] = []
    for name in args.cases.split(","):
        problem_name, size, batch_size = CASES[name]
        steps = steps_for(problem_name, size, batch_size, args.seconds)
        shape = (problem_name, size, batch_size, steps, args.preheat)
        compared = side_by_side(partial(hand_loop, *shape), partial(flowrate_run, *shape), args.rounds)
        hand, ours, ratio = compared.a, compared.b, compared.ratio
        failed |= ratio < TARGET
        print(
            f"{name:18s} batch {batch_size:4d} {steps:5d} steps x {args.rounds} rounds | "
            f"hand {statistics.median(hand):10.2f} samples/s | "
            f"flowrate {statistics.median(ours):10.2f} samples/s | "
            f"flowrate / hand {compared.describe()} "
            f"{'ok' if ratio >= TARGET else 'BELOW TARGET'} (>= {TARGET})"
        )
        runs = f"median; batch {batch_size}, {steps} steps x {args.rounds} rounds"
        figures += [
            Figure(f"{name} hand loop", statistics.median(hand), "samples/s", note=runs),
            Figure(f"{name} flowrate", statistics.median(ours), "samples/s", note=runs),
            Figure(
                f"{name} ratio",
                round(ratio, 4),
                "flowrate / hand loop",
                Target(">=", TARGET),
                f"ABBA order: {compared.describe()}",
            ),
        ]
    record("overhead", figures)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
