"""`flowrate generate`'s prefill (its TTFT) against optimum-benchmark's method on the same model.

optimum-benchmark times a prefill as transformers' ``model.generate(max_new_tokens=1,
min_new_tokens=1)`` on the batch of prompts: one forward over the prompt that keeps the last
position's logits, and the first token sampled from them. flowrate's TTFT is its prefill step
(Decoder.step over the prompt) and the argmax, timed by the same synchronized clock
`flowrate generate` uses. Per round, on one random-weight Llama in one process, each method once,
in an order that flips every round, after a warmup round (benchmarks/side_by_side.py's in_rounds);
the median of each:

  flowrate      generate_once's first token (the prefill of the last position's logits, the default)
  flowrate-all  the same with --prefill-logits all (every prompt position's logits: the old prefill)
  optimum       model.generate(max_new_tokens=1, min_new_tokens=1), greedy, end to end
  forward       one bare model(input_ids, logits_to_keep=1) and the argmax: the work alone, no cache
  forward+mask  the same with the all-ones attention mask generate() passes (an explicit mask
                instead of SDPA's causal flag): what separates the last two from flowrate

ratio = flowrate ÷ optimum, the ratio of the mean prefill times with its 95% interval (target
within 10%: 0.90–1.10; before side_by_side: the ratio of the medians). Default model: 4 layers, hidden 256,
vocabulary 32,000; batch 8 × 128 prompt tokens; fp32.

    python benchmarks/generate_prefill.py [--rounds 9] [--batch 8] [--prompt 128] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from flowrate.harness import generate_model as gm
from flowrate.harness.generate import generate_once
from flowrate.harness.generate_timing import RequestTiming, WallClock
from flowrate.measure.device import synchronizer
from flowrate.problems.registry import get_problem
from record import Figure, Target, record  # beside this script
from side_by_side import SideBySide, in_rounds

CONFIG = {
    "num_hidden_layers": 4,
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 512,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    problem = get_problem("hf:llama", "debug", dict(CONFIG))
    torch.manual_seed(0)
    model = problem.build_model().eval()
    decoder = gm.Decoder(problem, model)
    prompts = torch.randint(0, CONFIG["vocab_size"], (args.batch, args.prompt))
    sync = synchronizer(torch.device("cpu"))

    def ttft(all_logits: bool) -> Callable[[], float]:
        def once() -> float:
            clock = WallClock(sync)
            generate_once(decoder, prompts, 1, clock, all_logits=all_logits)
            return RequestTiming.from_token_times(clock.seconds()).ttft_s

        return once

    def optimum() -> float:
        start = time.perf_counter()
        model.generate(
            input_ids=prompts,
            attention_mask=torch.ones_like(prompts),
            max_new_tokens=1,
            min_new_tokens=1,
            do_sample=False,
            pad_token_id=0,
        )
        sync()
        return time.perf_counter() - start

    def forward(mask: bool) -> Callable[[], float]:
        def once() -> float:
            start = time.perf_counter()
            extra = {"attention_mask": torch.ones_like(prompts)} if mask else {}
            model(input_ids=prompts, logits_to_keep=1, use_cache=False, **extra).logits.argmax(dim=-1)
            sync()
            return time.perf_counter() - start

        return once

    methods = {
        "flowrate": ttft(False),
        "flowrate-all": ttft(True),
        "optimum": optimum,
        "forward": forward(False),
        "forward+mask": forward(True),
    }
    with torch.inference_mode():
        times = in_rounds(methods, args.rounds, warmup=1)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"hf:llama {CONFIG['num_hidden_layers']} layers, hidden {CONFIG['hidden_size']}, vocabulary "
        f"{CONFIG['vocab_size']}; batch {args.batch} x {args.prompt}; fp32; "
        f"{torch.get_num_threads()} threads; {args.rounds} rounds"
    )
    for name, median in medians.items():
        print(f"  {name:13s} median prefill {median * 1e3:8.1f} ms")
    compared = SideBySide(times["optimum"], times["flowrate"])
    old = SideBySide(times["optimum"], times["flowrate-all"])
    print(f"flowrate / optimum = {compared.ratio:.3f} (target 0.90-1.10); {compared.describe()}")
    print(f"flowrate-all / optimum = {old.ratio:.3f} (the old prefill); {old.describe()}")
    ratio = compared.ratio
    figures = [Figure(f"{name} median prefill", round(m * 1e3, 3), "ms") for name, m in medians.items()]
    figures += [
        Figure(
            "flowrate / optimum", round(ratio, 4), "ratio", note=f"ratio of the means: {compared.describe()}"
        ),
        Figure("flowrate / optimum, off 1 by", round(abs(ratio - 1), 4), "fraction", Target("<=", 0.1)),
    ]
    threads = torch.get_num_threads()
    shape = f"batch {args.batch} x {args.prompt}, fp32, {threads} threads, {args.rounds} rounds"
    record("generate_prefill", figures, note=shape)


if __name__ == "__main__":
    main()
