"""`flowrate survey`: a report card of this machine, each figure against its datasheet and band."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from flowrate.cli.options import output_options

if TYPE_CHECKING:
    from flowrate.harness.survey import SurveyConfig
    from flowrate.results.schema import Result


def _shapes(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[tuple[int, int, int], ...]:
    """'4096x4096x4096,8192x2048x4096' as (m, n, k) triples; a bad one is a usage error."""
    if not value:
        return ()
    shapes = []
    for text in value.split(","):
        parts = text.strip().lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise click.BadParameter(f"{text!r} is not MxNxK with three positive integers", ctx, param)
        m, n, k = (int(p) for p in parts)
        shapes.append((m, n, k))
    return tuple(shapes)


@click.command("survey")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option("--quick", is_flag=True, help="Fewer shapes, a smaller model: about 3 minutes on a small CPU.")
@click.option(
    "--seconds",
    type=click.FloatRange(0.01, 600),
    help="Timed seconds of each measurement. [default: 1, or 0.5 with --quick]",
)
@click.option(
    "--precision",
    "precisions",
    multiple=True,
    help="A matmul precision to survey (repeatable). [default: every one the device computes in]",
)
@click.option("--shapes", callback=_shapes, help="The matmul shape search, MxNxK,… [default: the device's]")
@click.option(
    "--no-model",
    is_flag=True,
    help="Leave out the reference model: its train, infer, generate and power figures.",
)
@click.option("--threads", type=click.IntRange(1, 4096), help="CPU threads for PyTorch. [default: PyTorch's]")
@click.option(
    "--bands",
    type=click.Path(dir_okay=False),
    help="A JSON file of figure name to [low, high], replacing those figures' default bands.",
)
@click.option("--strict", is_flag=True, help="Exit 1 when a figure falls outside its band, naming it.")
@click.option(
    "--html",
    type=click.Path(dir_okay=False),
    help="Also write the survey as one self-contained HTML page (the machine's report card).",
)
@output_options
def command(
    store: str | None,
    tags: tuple[str, ...],
    no_store: bool,
    as_json: bool,
    out: str | None,
    quiet: bool,
    bands: str | None,
    strict: bool,
    html: str | None,
    no_model: bool,
    **flags: Any,
) -> None:
    """Measure what this machine can do: the maximum matmul FLOP/s per precision (a shape search),
    attention, memory and host-link bandwidth, launch latency, and a reference model's training
    and inference steps, generation and power, each against its datasheet value and a
    plausibility band. Under torchrun it measures the all-reduce's bus bandwidth across the
    ranks instead."""
    import sys

    from flowrate.cli import console, survey_text
    from flowrate.cli.destination import Destination
    from flowrate.errors import RunFailed
    from flowrate.execution.launch import is_primary, launched
    from flowrate.harness.survey import survey_machine

    config = _config(flags, no_model, bands)
    _check_paths(out, html)
    primary = is_primary()
    quiet = quiet or not primary
    destination = Destination.open(store, tags, no_store, out, quiet, as_json)
    console.status(survey_text.start_line(launched(), config.quick), quiet)
    done = survey_machine(
        config,
        argv=sys.argv,
        on_figure=lambda figure: console.status(survey_text.progress_line(figure), quiet),
    )
    destination.report(
        done.result, f"flowrate survey {done.result.run_id}", survey_text.survey_rows(done.survey)
    )
    if html and primary:
        _card(done.result, html, quiet)
    if strict and done.outside:
        raise RunFailed(survey_text.outside_message(done.outside))


def _config(flags: dict[str, Any], no_model: bool, bands: str | None) -> SurveyConfig:
    """The survey the flags ask for; under torchrun, a flag choosing the device's own figures is
    refused first."""
    from flowrate.config import Precision
    from flowrate.harness.survey import SurveyConfig, check_launch
    from flowrate.harness.survey_bands import load_bands

    check_launch(flags["precisions"], flags["shapes"], not no_model)
    return SurveyConfig(
        device=flags["device"],
        quick=flags["quick"],
        seconds=flags["seconds"],
        precisions=tuple(Precision.parse(p).value for p in flags["precisions"]),
        shapes=flags["shapes"],
        model=not no_model,
        threads=flags["threads"],
        bands=load_bands(bands) if bands else {},
    )


def _check_paths(out: str | None, html: str | None) -> None:
    """--out and --html refused before anything is measured when they cannot be written."""
    from flowrate.cli.paths import check_html, check_out

    if out:
        check_out(out)
    if html:
        check_html(html)


def _card(result: Result, html: str, quiet: bool) -> None:
    """The survey as one self-contained HTML page."""
    from flowrate.analysis.survey_card import render_card
    from flowrate.cli import console
    from flowrate.io import write_atomic

    write_atomic(html, render_card(result))
    console.status(f"survey card written to {html}", quiet)
