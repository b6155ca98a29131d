"""--turns and --think-time: a load of multi-turn conversations (serving.bench.Conversations says
how they are sent). -n counts conversations, as AIPerf's --conversation-num does; each one's
number of turns is drawn from the --turns spec (a length spec: N, LOW:HIGH, normal:…, file:…)."""

from __future__ import annotations

import numpy as np

from flowrate.config.serve import Endpoint, ServeConfig
from flowrate.errors import ConfigError
from flowrate.serving import lengths
from flowrate.serving.bench import Conversations
from flowrate.serving.prompts import Prompt

MAX_TURNS = 1000  # turns in one conversation


def from_config(config: ServeConfig, n: int, seed: int) -> Conversations | None:
    """The conversations' turns, drawn from --turns with a generator of their own (so the prompts'
    lengths do not depend on it); None without --turns. Refuses what multi-turn cannot carry."""
    spec, think = config.turns, config.think_time
    if spec is None:
        if think is not None:
            raise ConfigError("--think-time", "only with --turns (the pause between a conversation's turns)")
        return None
    if config.endpoint != Endpoint.CHAT:
        raise ConfigError(
            "--turns", "multi-turn conversations need --endpoint chat (the history is messages)"
        )
    for other in ("replay", "find_max_rate"):
        if getattr(config, other):
            raise ConfigError("--turns", f"not with --{other.replace('_', '-')}")
    turns = lengths.parse(spec, "--turns").draw(n, np.random.default_rng([seed, 4]))
    if max(turns) > MAX_TURNS:
        raise ConfigError("--turns", f"{spec!r} draws {max(turns)} turns; at most {MAX_TURNS} a conversation")
    return Conversations(tuple(turns), think or 0.0)


def check_context(prompts: list[Prompt], conversations: Conversations, context: int | None) -> None:
    """Refuse, before sending anything, a conversation whose prompts and answers (each at its
    max_tokens) exceed the model's context by its last turn (each prompt's length by the
    tokenizer, else as asked: a dataset's prompts without a tokenizer are not checked)."""
    if context is None:
        return
    for number, (first, count) in enumerate(zip(conversations.firsts(), conversations.turns, strict=True)):
        sizes = [(p.tokens if p.tokens is not None else p.asked) for p in prompts[first : first + count]]
        if any(size is None for size in sizes):
            continue
        total = sum(size or 0 for size in sizes) + sum(p.max_tokens for p in prompts[first : first + count])
        if total > context:
            raise ConfigError(
                "--turns",
                f"conversation {number} holds up to {total} tokens by its last turn (its prompts and "
                f"answers), more than the model's context of {context}; fewer turns or shorter lengths",
            )
