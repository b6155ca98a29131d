"""flowrate on library models against a hand-written loop over the same model: hf:bert, timm:resnet50.

For each model, the same Problem object (its synthetic batch, its model factory) runs through
`flowrate.benchmark` and through a plain training loop written the way a user of the library
would: the library's own forward (transformers' ``model(input_ids=…, labels=…).loss``, a timm
classifier's logits into cross-entropy), ``loss.backward()``, fused AdamW with flowrate's
default settings, one synchronisation at the end. The two sides alternate in ABBA order in one
process for several rounds (benchmarks/side_by_side.py); the script prints each side's median
samples/s and the ratio of the means flowrate / hand loop with its 95% interval. Target: >= 0.98.

    python benchmarks/ecosystem.py                        # bert-base-uncased (seq 128) and resnet50
    python benchmarks/ecosystem.py --rounds 3 --steps 4 --batch-size 4

optimum-benchmark's training scenario (documented in its scenarios/training/config.py and
scenario.py) drives transformers' Trainer over a generated dataset (500 samples, sequence length
16 unless set), 140 steps of which the first 40 are warm-up; a Trainer callback times each step
from on_step_begin to on_step_end (perf_counter on the CPU, CUDA events on a GPU) and reports
(steps - warm-up) x batch / mean step latency. Its step is the Trainer's: AdamW with a linear
schedule and gradient clipping to norm 1.0, data loading outside the timed span. A comparison
with it is like for like only with flowrate's --clip-grad-norm 1.0 and the same sequence length;
optimum-benchmark is not installed here, so this script does not run it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F

import flowrate
from flowrate.problems.base import Batch, Problem
from flowrate.problems.registry import get_problem
from record import Figure, Target, record  # beside this script
from side_by_side import side_by_side

TARGET = 0.98
CPU = torch.device("cpu")


@dataclass(frozen=True)
class Case:
    spec: str
    preset: str | None
    options: dict[str, int | str]
    # the library's own training forward: model, batch -> loss
    forward: Callable[[torch.nn.Module, Batch], torch.Tensor]


def _bert_loss(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    ids, mask, labels = batch  # labels: -100 except at the masked positions
    return model(input_ids=ids, attention_mask=mask, labels=labels).loss  # type: ignore[no-any-return]


def _classifier_loss(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    images, labels = batch
    return F.cross_entropy(model(images), labels)


CASES = {
    "hf:bert": Case("hf:bert", "bert-base-uncased", {"seq_len": 128}, _bert_loss),
    "timm:resnet50": Case("timm:resnet50", None, {}, _classifier_loss),
}


def hand_loop(problem: Problem, case: Case, batch_size: int, steps: int, preheat: int) -> float:
    """A user's loop: plain forward/backward, fused AdamW, one sync at the end. Returns samples/s."""
    torch.manual_seed(0)
    model = problem.build_model().train()
    fused = {"fused": True} if _fused_cpu_adamw() else {"foreach": True}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, **fused)
    generator = torch.Generator(device=CPU).manual_seed(0)
    batches = [problem.make_batch(batch_size, CPU, generator) for _ in range(2)]

    def step(batch: Batch) -> torch.Tensor:
        loss = case.forward(model, batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    for i in range(preheat):
        step(batches[i % 2])
    start = time.perf_counter()
    for i in range(steps):
        loss = step(batches[i % 2])
    loss.item()  # synchronize (a no-op wait on the CPU, a real one on a GPU)
    return steps * batch_size / (time.perf_counter() - start)


def flowrate_run(problem: Problem, case: Case, batch_size: int, steps: int, preheat: int) -> float:
    result = flowrate.benchmark(
        problem, batch_size=batch_size, steps=steps, preheat_steps=preheat, device="cpu"
    )
    return result.summary.samples_per_sec


def _fused_cpu_adamw() -> bool:
    try:
        torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=0.1, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per side per round")
    parser.add_argument("--preheat", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, flowrate {flowrate.__version__}")
    failed = False
    figures: list[Figure] = []
    for name in args.cases.split(","):
        case = CASES[name]
        problem = get_problem(case.spec, case.preset, dict(case.options))
        shape = (problem, case, args.batch_size, args.steps, args.preheat)
        compared = side_by_side(partial(hand_loop, *shape), partial(flowrate_run, *shape), args.rounds)
        hand, ours, ratio = compared.a, compared.b, compared.ratio
        failed |= ratio < TARGET
        print(
            f"{name:14s} batch {args.batch_size:3d} {args.steps:4d} steps x {args.rounds} rounds | "
            f"hand {statistics.median(hand):8.3f} samples/s | "
            f"flowrate {statistics.median(ours):8.3f} samples/s | "
            f"flowrate / hand {compared.describe()} "
            f"{'ok' if ratio >= TARGET else 'BELOW TARGET'} (>= {TARGET})"
        )
        runs = f"median; batch {args.batch_size}, {args.steps} steps x {args.rounds} rounds"
        figures += [
            Figure(f"{name} hand loop", round(statistics.median(hand), 4), "samples/s", note=runs),
            Figure(f"{name} flowrate", round(statistics.median(ours), 4), "samples/s", note=runs),
            Figure(
                f"{name} ratio",
                round(ratio, 4),
                "flowrate / hand loop",
                Target(">=", TARGET),
                f"ABBA order: {compared.describe()}",
            ),
        ]
    record("ecosystem", figures)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
