"""GenerateConfig: one typed, validated description of a `flowrate generate` run.

Every field carries a Setting (flowrate.config.setting), as RunConfig's do: `flowrate generate`'s
options (flowrate.cli.generate), a generate sweep's keys and values (flowrate.campaigns.sweep) and
the checks below are made from them. A bad value raises ``ConfigError`` at construction, naming
the field and saying what would be valid.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from flowrate.choices import FreedMemory, Precision, PrefillLogits
from flowrate.config.bounds import COUNT, SECONDS, SEED, THREADS, Bounds
from flowrate.config.run import RECORD_ONLY, parse_batch_size, profile_dir_setting
from flowrate.config.setting import setting, settings
from flowrate.config.values import AUTO
from flowrate.errors import ConfigError

MAX_REPEATS = 100_000  # timed generations no --duration outlasts
# the precisions a generation casts its weights (and so its KV cache) to
GENERATE_PRECISIONS = ("fp32", "bf16", "pure-bf16", "fp16")


def _generate_precision(value: str) -> str:
    """A precision a generation takes, in its one spelling (bf16 for BF16 or bfloat16)."""
    try:
        spelled = Precision.parse(value).value
    except ConfigError:
        spelled = value
    if spelled not in GENERATE_PRECISIONS:
        raise ConfigError("precision", f"generate takes {', '.join(GENERATE_PRECISIONS)}; got {value!r}")
    return spelled


@dataclass(frozen=True)
class GenerateConfig:
    """Everything that defines one generation run. Invalid values fail at construction."""

    problem: str = setting(
        "transformer", help="A causal LM: transformer or hf:ARCH.", flags=("-p", "--problem")
    )
    """A causal language model: a zoo decoder (transformer, gpt2, …) or an hf: model."""
    size: str | None = setting(
        None, help="Named size (zoo) or preset (hf:), e.g. debug.", default_help="the family's"
    )
    """Named size of the zoo family, or an hf: model's preset; None takes the family default."""
    problem_options: dict[str, int | str] = setting(
        factory=dict,
        help="Zoo shape option.",
        flags=("-O", "--option"),
        kind="options",
        default_help="",
        metavar="KEY=N",
        own_option=False,
    )
    """Overrides of the model's shape (-O), and an hf: model's config values (--hf-config, as text)."""
    batch_size: int | str = setting(
        1,
        help="Sequences generated together, or auto: as many as the free memory holds.",
        flags=("-b", "--batch-size"),
        kind="batch",
        bounds=COUNT,
        unit="sequences",
    )
    """Sequences generated together; "auto": as many as the free memory holds, at most max_batch_size."""
    max_batch_size: int = setting(256, help="The most auto takes.", bounds=COUNT, unit="sequences")
    """The largest batch "auto" takes."""
    prompt_len: int | None = setting(
        None, help="Prompt tokens.", bounds=COUNT, unit="tokens", default_help="min(128, context/2)"
    )
    """Prompt tokens per sequence; None: min(128, half the model's context)."""
    new_tokens: int | None = setting(
        None,
        help="Output tokens, exactly.",
        bounds=COUNT,
        unit="tokens",
        default_help="min(128, the rest of the context)",
    )
    """Tokens generated per sequence, exactly (no end-of-sequence stop); None: the rest of the
    context, at most 128."""
    repeats: int = setting(
        5,
        help="Timed generations.",
        bounds=Bounds("a positive integer", 1, MAX_REPEATS),
        unit="generations",
    )
    """Timed generations: at least this many (and as many more as fit in duration_s)."""
    duration_s: float | None = setting(
        None, help="Keep generating this many seconds.", flags=("--duration",), bounds=SECONDS, unit="s"
    )
    """Keep generating until this many seconds have passed (and repeats are done); None: repeats alone."""
    warmup: int = setting(
        1,
        help="Untimed generations first.",
        bounds=Bounds("an integer 0 or more", 0, MAX_REPEATS),
        unit="generations",
    )
    """Untimed generations before the timed ones."""
    precision: str = setting("fp32", help="Weights and cache: fp32, bf16 or fp16.", spell=_generate_precision)
    """The weights' (and so the cache's) dtype: no autocast, as served (GENERATE_PRECISIONS)."""
    device: str = setting(AUTO, help="auto, cpu, cuda or cuda:N.")
    """Where it runs: "auto" (cuda when present, else cpu), "cpu", "cuda" or "cuda:N"."""
    seed: int = setting(0, help="Seed of weights and prompts.", bounds=SEED)
    """Seeds the model's weights and the synthetic prompts."""
    threads: int | None = setting(
        None, help="CPU threads for PyTorch.", bounds=THREADS, unit="threads", default_help="PyTorch's"
    )
    """torch.set_num_threads for the CPU; None leaves PyTorch's choice."""
    prefill_logits: PrefillLogits = setting(
        PrefillLogits.LAST,
        help="The prompt positions the prefill computes logits for: the last, as servers do, or all.",
    )
    """The prompt positions the prefill computes logits for (PrefillLogits)."""
    freed_memory: FreedMemory = setting(
        FreedMemory.RELEASE,
        help="Host memory a step frees: release, the C library's default (as a plain process), or "
        "keep it for the next step (labelled in the record).",
    )
    """release (the C library's policy, as a plain process) or keep (flowrate.measure.freed_memory)."""
    profile_dir: str | None = profile_dir_setting()
    """A folder for the profile taken after the timed generations (flowrate.harness.profiling): a
    few short generations' Chrome trace, operator table and step breakdown; None takes no profile."""

    # --- as a record holds it (flowrate.results.codec's open sections; never a setting) ---
    extra: dict[str, object] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    """Keys a record's configuration holds beyond these fields: ``mode`` and ``execution`` (see
    RECORDED), and an older or newer flowrate's."""
    written: tuple[str, ...] | None = dataclasses.field(default=None, compare=False, repr=False)
    """The keys a record held, in its order; None for a configuration made here. One read from a
    record is what ran: it is not checked again."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise parsed values in place
        set_(self, "freed_memory", FreedMemory.parse(self.freed_memory))
        set_(self, "prefill_logits", PrefillLogits.parse(self.prefill_logits))
        if self.written is not None:
            return
        if self.batch_size is None:
            raise ConfigError("batch_size", "must be a positive integer or 'auto', got None")
        set_(self, "batch_size", parse_batch_size(self.batch_size, GenerateConfig))
        for found in settings(GenerateConfig):
            found.check(getattr(self, found.name))
        set_(self, "precision", _generate_precision(self.precision))

    def replace(self, **changes: Any) -> GenerateConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain values (the record's keys beyond them left out)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in RECORD_ONLY}
        data["problem_options"] = dict(self.problem_options)
        return data

    def recorded(self) -> GenerateConfig:
        """This configuration as a generation's record holds it: its settings, then the step
        (``mode``) and where the weights live (``execution``), named as a run's record names them."""
        return self.replace(extra={**RECORDED, **self.extra})

    # what a generation's record says beside its settings, read as a run's configuration is
    @property
    def mode(self) -> str:
        return RECORDED["mode"]

    @property
    def execution(self) -> str:
        return RECORDED["execution"]

    @property
    def optimizer(self) -> None:
        return None


RECORDED = {"mode": "generate", "execution": "resident"}
