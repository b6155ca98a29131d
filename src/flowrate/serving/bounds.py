"""Bounds on what one serve-bench run may ask for: far above any server's context or a day's
load, low enough that the prompts are made in memory, in seconds, before anything is sent.
(No imports: the command line reads these while it declares its options.)"""

MAX_TOKENS = 1 << 24  # one prompt's or one output's length, in tokens
MAX_REQUESTS = 10_000_000  # -n
MAX_PROMPT_TOKENS = 1 << 28  # all the prompts' tokens together (about 1.5 GB of text)
