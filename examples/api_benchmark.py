"""Benchmark from Python: a zoo problem by name, and your own Problem object."""

import flowrate
from custom_problem import SmallConvNet  # examples/custom_problem.py

# A zoo problem, by name: the tiny debug transformer, 20 timed steps.
result = flowrate.benchmark("transformer", size="debug", steps=20, preheat_steps=2)
print(
    f"transformer/debug: {result.summary.samples_per_sec:.1f} samples/s, "
    f"{result.summary.tokens_per_sec:.0f} tokens/s"
)

# Your own problem, as an object, in bf16 autocast.
result = flowrate.benchmark(
    SmallConvNet(channels=8), precision="bf16", steps=20, batch_size=16, sample_every=4
)
print(
    f"small_convnet: {result.summary.samples_per_sec:.1f} samples/s "
    f"(median {result.summary.median_samples_per_sec:.1f}, CV {result.summary.cv:.1%})"
)

result.save("small_convnet.json")  # the versioned record: config, environment, intervals, summary
assert flowrate.Result.load("small_convnet.json").summary == result.summary
