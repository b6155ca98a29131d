"""Prompts: synthetic ones of set token lengths, or a JSONL dataset.

With a tokenizer from a local folder (its tokenizer.json, read by `tokenizers` alone: no hub, no
network) synthetic prompts are token-exact. Without one they are words, calibrated against the
server: one-token probes read its usage.prompt_tokens for each word alone ("w", the first word of
a prompt) and doubled ("w w"), so a word after the first costs the difference (the server's own
additions, a BOS token or a chat template, cancel out), and each prompt takes words in its own
order, skipping any that would pass its asked length, until the predicted count reaches it (or
no word fits). The count is exact when a word's tokens do not depend on its neighbours
(tokenizers split on spaces before they merge: BPE, SentencePiece); the load's own
usage.prompt_tokens then says how near each prompt landed.

Each prompt's own words are a permutation of WORDS of its own (``own_order``), cycled to its
length, so two prompts part within their first eight words unless their indices are 18!/10!
apart: a prefix-caching server gets no hits on a load that asks for none. A --shared-prefix-len
prefix comes before them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from flowrate.config.serve import MAX_TOKENS
from flowrate.errors import ConfigError
from flowrate.serving.lengths import LengthSpec

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "small",
    "birds",
    "sing",
    "in",
    "tall",
    "green",
    "trees",
]


@dataclass(frozen=True)
class Prompt:
    text: str
    tokens: int | None  # by the local tokenizer; None without one
    max_tokens: int
    asked: int | None = None  # the length asked for (synthetic or replayed); None for a dataset
    group: int | None = None  # which --shared-prefix-len prefix it starts with (None: no prefix)


@dataclass(frozen=True)
class SharedPrefix:
    """--shared-prefix-len and --prefix-groups: prompt i starts with group i % groups's prefix of
    `tokens` tokens, then its own asked length; each group's words are a seeded order of WORDS
    of its own, so two groups' prefixes part within their first words."""

    tokens: int
    groups: int = 1
    seed: int = 0

    def order(self, group: int) -> list[str]:
        rng = np.random.default_rng([self.seed, 2, group])
        return [WORDS[i] for i in rng.permutation(len(WORDS))]


@dataclass(frozen=True)
class LocalTokenizer:
    encode: Callable[[str], list[int]]
    decode: Callable[[list[int]], str]
    starts: Callable[[str], list[int]]  # each token's first character's offset in the text
    context: int | None  # the model's context length, from config.json when the folder has one


def load_tokenizer(folder: Path) -> LocalTokenizer:
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ConfigError(
            "--tokenizer", "needs the tokenizers package: pip install 'flowrate[serve]'"
        ) from None

    path = folder / "tokenizer.json"
    if not path.is_file():
        raise ConfigError("--tokenizer", f"{folder} has no tokenizer.json (a fast tokenizer's file)")
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as error:  # the tokenizers package raises its own untyped Exception
        reason = str(error).splitlines()[0][:120] if str(error) else type(error).__name__
        raise ConfigError(
            "--tokenizer", f"{path} is not a tokenizer file tokenizers can read ({reason})"
        ) from None
    return LocalTokenizer(
        encode=lambda text: tok.encode(text, add_special_tokens=False).ids,
        decode=tok.decode,
        starts=lambda text: [start for start, _ in tok.encode(text, add_special_tokens=False).offsets],
        context=_context(folder / "config.json"),
    )


def _context(config: Path) -> int | None:
    """The model's max_position_embeddings from its config.json; None when absent or unreadable."""
    try:
        value = json.loads(config.read_text(encoding="utf-8")).get("max_position_embeddings")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def own_order(index: int) -> list[str]:
    """Prompt ``index``'s word order: the index-th permutation of WORDS (its Lehmer code read
    from the lowest digit, so prompt i starts with WORDS[i % 18] and prompts i and j share their
    first k words only when i ≡ j modulo 18·17·…·(18 − k + 1))."""
    left, out, rest = list(WORDS), [], index
    while left:
        rest, digit = divmod(rest, len(left))
        out.append(left.pop(digit))
    return out


def _exact_text(
    tokenizer: LocalTokenizer, length: int, offset: int, order: list[str] = WORDS
) -> tuple[str, int]:
    """Text that re-encodes to exactly `length` tokens, or as near as the tokenizer allows: the
    decoded first k tokens of a word sequence (`order` from `offset`, cyclic), k tried from
    `length` outwards (decoding and re-encoding may merge or split across the cut)."""
    words = [order[(offset + i) % len(order)] for i in range(length * 2 + 8)]
    ids = tokenizer.encode(" ".join(words))
    best: tuple[str, int] | None = None
    for k in sorted(range(max(1, length - 8), length + 9), key=lambda k: abs(k - length)):
        text = tokenizer.decode(ids[:k])
        count = len(tokenizer.encode(text))
        if count == length:
            return text, count
        if best is None or abs(count - length) < abs(best[1] - length):
            best = (text, count)
    assert best is not None
    return best


def synthetic(
    n: int,
    input_len: LengthSpec | tuple[int, int],
    output_len: LengthSpec | tuple[int, int],
    tokenizer: LocalTokenizer | None,
    seed: int = 0,
    fixed: list[tuple[int, int]] | None = None,
    prefix: SharedPrefix | None = None,
) -> list[Prompt]:
    """n prompts with input and output lengths drawn from the given specs (a pair: uniform in
    LOW..HIGH), input lengths first, from one generator seeded by `seed` (or `fixed` pairs, from a
    replayed trace); each prompt's own words are in its own order (``own_order``).
    With a `prefix`, each prompt is its group's prefix, then its own words: it asks for the
    prefix's tokens plus its drawn length."""
    rng = np.random.default_rng(seed)
    if fixed is None:
        drawn_in = _spec(input_len).draw(n, rng)
        fixed = list(zip(drawn_in, _spec(output_len).draw(n, rng), strict=True))
    pairs = fixed
    heads = _prefix_texts(prefix, tokenizer)
    out = []
    for index, (n_in, n_out) in enumerate(pairs):
        group = None if prefix is None else index % prefix.groups
        head = "" if group is None else heads[group] + " "
        asked = n_in + (prefix.tokens if prefix else 0)
        if tokenizer is None:
            order = own_order(index)
            text = head + " ".join(order[i % len(order)] for i in range(n_in))
            out.append(Prompt(text, None, n_out, asked, group))
        else:
            own, count = _exact_text(tokenizer, n_in, 0, own_order(index))
            text = head + own
            out.append(Prompt(text, len(tokenizer.encode(text)) if head else count, n_out, asked, group))
    return out


def _prefix_texts(prefix: SharedPrefix | None, tokenizer: LocalTokenizer | None) -> list[str]:
    """Each group's prefix: token-exact with a tokenizer, else one word a token (calibrated later)."""
    if prefix is None:
        return []
    if tokenizer is None:
        return [
            " ".join(order[i % len(order)] for i in range(prefix.tokens))
            for order in map(prefix.order, range(prefix.groups))
        ]
    return [_exact_text(tokenizer, prefix.tokens, 0, prefix.order(g))[0] for g in range(prefix.groups)]


def _spec(spec: LengthSpec | tuple[int, int]) -> LengthSpec:
    return spec if isinstance(spec, LengthSpec) else LengthSpec("uniform", (float(spec[0]), float(spec[1])))


def calibration_texts() -> list[str]:
    """What the probes send: each word alone, then each word doubled."""
    return WORDS + [f"{word} {word}" for word in WORDS]


@dataclass(frozen=True)
class WordCosts:
    """A word's tokens as the server counts them: as a prompt's first word (with whatever the
    server adds to every prompt), and after another word (its leading space included)."""

    first: dict[str, int]
    after: dict[str, int]

    @classmethod
    def from_counts(cls, counts: list[int | None]) -> WordCosts | str:
        """From the servers' prompt_tokens for calibration_texts(), or why they cannot calibrate."""
        half = len(WORDS)
        if len(counts) != 2 * half or any(c is None for c in counts):
            missing = sum(c is None for c in counts)
            return f"{missing} of {len(counts)} probes got no usage.prompt_tokens"
        alone, doubled = counts[:half], counts[half:]
        costs = cls(
            dict(zip(WORDS, (c or 0 for c in alone), strict=True)),
            {w: (d or 0) - (a or 0) for w, a, d in zip(WORDS, alone, doubled, strict=True)},
        )
        if min(costs.first.values()) < 1 or min(costs.after.values()) < 1:
            return "the server counted a word as no tokens"
        return costs

    def words_for(
        self,
        length: int,
        offset: int,
        order: list[str] = WORDS,
        head: tuple[list[str], int] | None = None,
    ) -> tuple[list[str], int]:
        """Words from `offset` on, in `order` (cyclic), skipping a word that would pass
        `length`, until the predicted count reaches it or no word fits; and that count. With a
        `head` (words and their count, a shared prefix), the words follow it."""
        if head is None:
            first = order[offset % len(order)]
            words, count, at, misses = [first], self.first[first], offset + 1, 0
        else:
            words, count, at, misses = list(head[0]), head[1], offset, 0
        while count < length and misses < len(order):
            word = order[at % len(order)]
            at += 1
            if count + self.after[word] <= length:
                words.append(word)
                count += self.after[word]
                misses = 0
            else:
                misses += 1
        return words, count


def calibrated(made: list[Prompt], costs: WordCosts, prefix: SharedPrefix | None = None) -> list[Prompt]:
    """Synthetic prompts made without a tokenizer, remade with the words the server's counts call
    for (each prompt's own words in its own order, as ``synthetic`` makes them; a shared
    prefix is its group's words up to the prefix's tokens, the same for the whole group)."""
    heads = (
        []
        if prefix is None
        else [costs.words_for(prefix.tokens, 0, prefix.order(g)) for g in range(prefix.groups)]
    )
    out = []
    for index, prompt in enumerate(made):
        assert prompt.asked is not None
        head = None if prompt.group is None else heads[prompt.group]
        words, _ = costs.words_for(prompt.asked, 0, own_order(index), head=head)
        out.append(Prompt(" ".join(words), None, prompt.max_tokens, prompt.asked, prompt.group))
    return out


def dataset(path: Path, n: int, default_output: list[int], tokenizer: LocalTokenizer | None) -> list[Prompt]:
    """JSONL rows {"prompt": text, "output_len": n (optional)}, cycled to n prompts; prompt i
    without an output_len asks for default_output[i] tokens (drawn from --output-len)."""
    rows: list[Prompt] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise ConfigError("--dataset", f"{path}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ConfigError("--dataset", f"{path} is not UTF-8 text (JSONL prompts)") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            text, n_out = row["prompt"], int(row.get("output_len", 0))
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError):
            raise ConfigError(
                "--dataset", f"{path} line {number}: expected a JSON object with a prompt"
            ) from None
        if not isinstance(text, str) or not 0 <= n_out <= MAX_TOKENS or ("output_len" in row and not n_out):
            raise ConfigError(
                "--dataset",
                f"{path} line {number}: a prompt is a string and output_len 1 to {MAX_TOKENS}",
            )
        rows.append(Prompt(text, len(tokenizer.encode(text)) if tokenizer else None, n_out))
    if not rows:
        raise ConfigError("--dataset", f"{path}: no prompts in it")
    cycled = [rows[i % len(rows)] for i in range(n)]
    return [p if p.max_tokens else replace(p, max_tokens=default_output[i]) for i, p in enumerate(cycled)]


def check_context(prompts: list[Prompt], context: int | None) -> None:
    """Refuse, before sending anything, a prompt whose length plus its output exceeds the model's
    context (when both are known)."""
    if context is None:
        return
    for index, prompt in enumerate(prompts):
        if prompt.tokens is not None and prompt.tokens + prompt.max_tokens > context:
            raise ConfigError(
                "--input-len",
                f"prompt {index} has {prompt.tokens} tokens + {prompt.max_tokens} to generate, "
                f"more than the model's context of {context}; shorten it or use --max-model-len",
            )
