"""The numbers `flowrate generate` takes, one table for GenerateConfig and the command's flags.

Kept apart from generate.py so the command line reads them without importing torch.
"""

from __future__ import annotations

from flowrate.config import BOUNDS, Bounds

MAX_REPEATS = 100_000  # timed generations no --duration outlasts

# The numbers a generation takes, as run's (flowrate.config.BOUNDS): a value outside is refused
# before anything is built, naming the flag.
GENERATE_BOUNDS: dict[str, Bounds] = {
    "batch_size": BOUNDS["batch_size"],
    "max_batch_size": BOUNDS["max_batch_size"],
    "prompt_len": BOUNDS["batch_size"],  # a positive integer up to 2**31 - 1
    "new_tokens": BOUNDS["batch_size"],
    "repeats": Bounds("a positive integer", 1, MAX_REPEATS),
    "duration_s": BOUNDS["duration_s"],
    "warmup": Bounds("an integer 0 or more", 0, MAX_REPEATS),
    "seed": BOUNDS["seed"],
    "threads": BOUNDS["threads"],
}
