"""`flowrate generate`: greedy generation with a KV cache, prefill and decode timed apart."""

from __future__ import annotations

from typing import Any

import click

from flowrate.cli.options import output_options
from flowrate.cli.param_types import BatchSize, SettingType
from flowrate.harness.generate_bounds import GENERATE_BOUNDS

BATCH_HELP = "Sequences generated together, or auto: as many as the free memory holds. [default: 1]"


def _number(field: str) -> SettingType:
    """A numeric flag held to GenerateConfig's bounds for its field as the line is read."""
    return SettingType(GENERATE_BOUNDS[field])


@click.command("generate")
@click.option(
    "--problem", "-p", default="transformer", show_default=True, help="A causal LM: transformer or hf:ARCH."
)
@click.option("--size", help="Named size (zoo) or preset (hf:), e.g. debug. [default: the family's]")
@click.option("--preset", help="hf: a published architecture's config values, e.g. llama-3.2-1b (as --size).")
@click.option("-O", "--option", "extra_options", multiple=True, metavar="KEY=N", help="Zoo shape option.")
@click.option("--hf-config", "hf_config", multiple=True, metavar="KEY=VALUE", help="hf: config override.")
@click.option("--batch-size", "-b", type=BatchSize(), default="1", help=BATCH_HELP)
@click.option(
    "--max-batch-size",
    type=_number("max_batch_size"),
    default=256,
    show_default=True,
    help="The most auto takes.",
)
@click.option(
    "--prompt-len", type=_number("prompt_len"), help="Prompt tokens. [default: min(128, context/2)]"
)
@click.option(
    "--new-tokens",
    type=_number("new_tokens"),
    help="Output tokens, exactly. [default: min(128, the rest of the context)]",
)
@click.option("--repeats", type=_number("repeats"), default=5, show_default=True, help="Timed generations.")
@click.option("--duration", type=_number("duration_s"), help="Keep generating this many seconds.")
@click.option(
    "--warmup", type=_number("warmup"), default=1, show_default=True, help="Untimed generations first."
)
@click.option("--precision", default="fp32", show_default=True, help="Weights and cache: fp32, bf16 or fp16.")
@click.option(
    "--mode", type=click.Choice(["train", "infer"]), help="Generation is inference: infer or nothing."
)
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option(
    "--seed", type=_number("seed"), default=0, show_default=True, help="Seed of weights and prompts."
)
@click.option("--threads", type=_number("threads"), help="CPU threads for PyTorch. [default: PyTorch's]")
@click.option(
    "--prefill-logits",
    type=click.Choice(["last", "all"]),
    default="last",
    show_default=True,
    help="The prompt positions the prefill computes logits for: the last, as servers do, or all.",
)
@click.option(
    "--freed-memory",
    type=click.Choice(["release", "keep"]),
    default="release",
    show_default=True,
    help="Host memory a step frees: release, the C library's default (as a plain process), or keep "
    "it for the next step (labelled in the record).",
)
@output_options
def command(
    store: str | None,
    tags: tuple[str, ...],
    no_store: bool,
    as_json: bool,
    out: str | None,
    quiet: bool,
    **flags: Any,
) -> None:
    """Generate greedily with a KV cache: TTFT, TPOT, every inter-token gap, E2E, prefill and
    decode tokens/s, KV-cache bytes, prefill MFU and decode memory bandwidth."""
    import sys

    from flowrate.cli import console, generate_text
    from flowrate.cli.destination import Destination
    from flowrate.cli.paths import check_out
    from flowrate.harness.generate import run_generation

    config, problem = generate_text.resolve(flags)
    if out:
        check_out(out)
    destination = Destination.open(store, tags, no_store, out, quiet, as_json)
    console.status(generate_text.start_line(config, problem), quiet)
    result = run_generation(config, problem, argv=sys.argv)
    destination.report(result, f"flowrate generate {result.run_id}", generate_text.generation_rows(result))
