"""`flowrate generate`: greedy generation with a KV cache, prefill and decode timed apart.

Its options are made from GenerateConfig's fields (flowrate.cli.options.setting_option), in field
order, with the flags that are not fields (--preset, --hf-config, --mode) beside the ones they go with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from flowrate.cli.options import output_options, setting_option
from flowrate.config import GenerateConfig, settings

# flags that are no GenerateConfig field: set through one (a preset is the size, --hf-config the
# problem's options), or refused (a generation does not train)
_PRESET = click.option(
    "--preset", help="hf: a published architecture's config values, e.g. llama-3.2-1b (as --size)."
)
_HF_CONFIG = click.option(
    "--hf-config", "hf_config", multiple=True, metavar="KEY=VALUE", help="hf: config override."
)
_MODE = click.option(
    "--mode", type=click.Choice(["train", "infer"]), help="Generation is inference: infer or nothing."
)


def _generate_options() -> list[Callable[..., Any]]:
    """GenerateConfig's settings as options, in field order, each other flag beside its field."""
    options: list[Callable[..., Any]] = []
    for found in settings(GenerateConfig):
        if found.name == "problem_options":  # -O, its own flag that is not the field's name
            option = click.option(
                *found.flags, "extra_options", multiple=True, metavar=found.setting.metavar, help=found.help
            )
            options += [_PRESET, option, _HF_CONFIG]
            continue
        options.append(setting_option(found, GenerateConfig))
        if found.name == "precision":
            options.append(_MODE)
    return options


def generate_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """The options that define a generation, made from GenerateConfig's Settings as they are when
    the command is declared."""
    for option in reversed(_generate_options()):
        function = option(function)
    return function


@click.command("generate")
@generate_options
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
    from flowrate.cli.paths import check_folder, check_out
    from flowrate.harness.generate import run_generation

    config, problem = generate_text.resolve(flags)
    if out:
        check_out(out)
    if config.profile_dir is not None:
        check_folder(config.profile_dir, "profile")
    destination = Destination.open(store, tags, no_store, out, quiet, as_json)
    console.status(generate_text.start_line(config, problem), quiet)
    result = run_generation(config, problem, argv=sys.argv)
    destination.report(result, f"flowrate generate {result.run_id}", generate_text.generation_rows(result))
