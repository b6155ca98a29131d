"""`flowrate generate`'s decode tokens/s against a hand-written greedy loop over the same cache.

Per case, on one model in one process, one generation of each kind per round, in an order that
flips every round (benchmarks/side_by_side.py's in_rounds), for --rounds rounds after a warmup
round (median of each):

  flowrate   generate_once with its synchronized per-token clock, the loop run_generation times for
             `flowrate generate`: decode tokens/s = B × (n_out − 1) / (E2E − TTFT)
  hand       model + the same cache (zoo: GPT.new_cache/cached; hf: DynamicCache), argmax, no clock
             inside the loop: decode tokens/s = B × (n_out − 1) / (last token − first token)
  generate   hf: models only: transformers' model.generate(min_new_tokens = max_new_tokens, greedy),
             decode timed by a streamer's put() calls (first new token to last)

ratio = flowrate ÷ hand, the ratio of the means with its 95% interval (target ≥ 0.98; before
side_by_side: the ratio of the medians). One torch thread by default: on shared cores a second
thread's spin-waits swamp the difference being measured. Cases: zoo transformer/debug, hf:llama
tiny, and with --big llama-3.2-1b shapes (random weights, bf16, batch 1).

    python benchmarks/generate.py [--rounds 30] [--big] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from functools import partial

import torch

from flowrate.config import FreedMemory
from flowrate.harness import generate_model as gm
from flowrate.harness.generate import generate_once
from flowrate.harness.generate_timing import RequestTiming, WallClock
from flowrate.measure import freed_memory
from flowrate.measure.device import synchronizer
from flowrate.problems.registry import get_problem
from flowrate.problems.transformer import synthetic_tokens
from record import Figure, Target, record  # beside this script
from side_by_side import SideBySide, in_rounds


@dataclass(frozen=True)
class Case:
    label: str
    problem: str
    size: str
    precision: str
    batch: int
    prompt: int
    new: int


CASES = [
    Case("zoo transformer/debug", "transformer", "debug", "fp32", 1, 16, 16),
    Case("hf:llama tiny", "hf:llama", "debug", "fp32", 1, 32, 64),
]
BIG = Case("hf:llama llama-3.2-1b", "hf:llama", "llama-3.2-1b", "bf16", 1, 32, 16)
BIG_ROUNDS = 5


def _model(case: Case) -> tuple[gm.Decoder, torch.Tensor]:
    problem = get_problem(case.problem, case.size)
    torch.manual_seed(0)
    model = problem.build_model().to(gm.weight_dtype(case.precision)).eval()
    vocab = gm.shape_of(problem).vocab_size
    prompts = synthetic_tokens((case.batch, case.prompt), vocab, torch.device("cpu"), torch.Generator())
    return gm.Decoder(problem, model), prompts


def flowrate_rate(case: Case, decoder: gm.Decoder, prompts: torch.Tensor) -> float:
    """One generation as run_generation times it: generate_once and its synchronized clock."""
    clock = WallClock(synchronizer(torch.device("cpu")))
    generate_once(decoder, prompts, case.new, clock)
    timing = RequestTiming.from_token_times(clock.seconds())
    return case.batch * (case.new - 1) / (timing.e2e_s - timing.ttft_s)


def hand_rate(case: Case, decoder: gm.Decoder, prompts: torch.Tensor) -> float:
    """One generation by a plain loop over the same model and cache kind, timed around the decode."""
    model = decoder.model
    if hasattr(model, "new_cache"):  # the zoo GPT
        cache = model.new_cache(case.batch, case.prompt + case.new - 1)
        token = model.cached(prompts, cache)[:, -1].argmax(-1, keepdim=True)
        start = time.perf_counter()
        for _ in range(case.new - 1):
            token = model.cached(token, cache)[:, -1].argmax(-1, keepdim=True)
    else:
        from transformers import DynamicCache

        cache = DynamicCache(config=model.config)
        logits = model(input_ids=prompts, past_key_values=cache, use_cache=True).logits
        token = logits[:, -1].argmax(-1, keepdim=True)
        start = time.perf_counter()
        for _ in range(case.new - 1):
            logits = model(input_ids=token, past_key_values=cache, use_cache=True).logits
            token = logits[:, -1].argmax(-1, keepdim=True)
    return case.batch * (case.new - 1) / (time.perf_counter() - start)


class _Stamps:
    """A streamer for generate(): the moment of each put (the prompt first, then each token)."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def put(self, value: torch.Tensor) -> None:
        self.times.append(time.perf_counter())

    def end(self) -> None:
        pass


def generate_rate(case: Case, decoder: gm.Decoder, prompts: torch.Tensor) -> float:
    stamps = _Stamps()
    decoder.model.generate(
        prompts,
        attention_mask=torch.ones_like(prompts),
        max_new_tokens=case.new,
        min_new_tokens=case.new,
        do_sample=False,
        streamer=stamps,
        pad_token_id=0,
    )
    return case.batch * (case.new - 1) / (stamps.times[-1] - stamps.times[1])  # first new token to last


def measure(case: Case, rounds: int) -> list[Figure]:
    """One generation of each kind per round, the order flipped every round (after one warmup
    round): median rates."""
    with torch.inference_mode():
        decoder, prompts = _model(case)
        kinds = {"flowrate": flowrate_rate, "hand": hand_rate}
        if case.problem.startswith("hf:"):
            kinds["generate"] = generate_rate
        # the order flips every round (A B C, C B A, …): whatever the kind before leaves behind
        # (caches, allocator, clocks) falls on each kind alike
        sides = {name: partial(rate, case, decoder, prompts) for name, rate in kinds.items()}
        rates = in_rounds(sides, rounds, warmup=1)
    compared = SideBySide(rates["hand"], rates["flowrate"])
    med = {k: statistics.median(v) for k, v in rates.items()}
    line = (
        f"{case.label:24s} b{case.batch} p{case.prompt} n{case.new} {case.precision:5s} "
        f"flowrate {med['flowrate']:9.1f}  hand {med['hand']:9.1f}  ratio {compared.describe()}"
    )
    if "generate" in med:
        line += f"  generate() {med['generate']:9.1f} ({med['generate'] / med['hand']:.3f} of hand)"
    print(line, flush=True)
    label = f"{case.label} b{case.batch} p{case.prompt} n{case.new} {case.precision}"
    runs = f"median of {rounds} rounds"
    figures = [
        Figure(f"{label} flowrate", round(med["flowrate"], 2), "tokens/s", note=runs),
        Figure(f"{label} hand", round(med["hand"], 2), "tokens/s", note=runs),
        Figure(
            f"{label} flowrate / hand",
            round(compared.ratio, 4),
            "",
            Target(">=", 0.98),
            f"ratio of the means, in rounds: {compared.describe()}",
        ),
    ]
    if "generate" in med:
        figures.append(Figure(f"{label} generate()", round(med["generate"], 2), "tokens/s", note=runs))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--big", action="store_true", help="also llama-3.2-1b shapes, bf16, batch 1")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: steadier on shared cores)")
    args = parser.parse_args()
    freed_memory.apply(FreedMemory.KEEP)  # the hand loop under flowrate's default allocator setting too
    torch.set_num_threads(args.threads)
    print(f"decode tokens/s (median of {args.rounds} rounds), torch threads {torch.get_num_threads()}")
    figures = []
    for case in [*CASES, *([BIG] if args.big else [])]:
        figures += measure(case, args.rounds if case is not BIG else BIG_ROUNDS)
    record("generate", figures, note=f"{torch.get_num_threads()} torch threads")


if __name__ == "__main__":
    main()
