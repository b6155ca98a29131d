"""`flowrate analyze-input`: measure the input pipeline alone at several loader configurations,
compare each with the model's consumption rate, and recommend the smallest that keeps up.

The set-up and the measuring live in flowrate.harness (input_advice, analyze_input); the text in
flowrate.cli.analyze_input_text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from flowrate.cli.options import run_options
from flowrate.cli.param_types import FiniteRange
from flowrate.config import BOUNDS, WEEK_S

if TYPE_CHECKING:
    from flowrate.harness.analyze_input import PipelinePoint
    from flowrate.harness.input_advice import InputSetup

# Seconds of synthetic timing for the model's rate when the user sets no length.
MODEL_S = 3.0


@click.command("analyze-input")
@run_options
@click.option(
    "--consumption-rate",
    type=FiniteRange(min=0, min_open=True),
    metavar="SAMPLES_PER_S",
    help="The model's rate to compare with, instead of measuring it with synthetic data (e.g. a "
    "rate measured on the target machine).",
)
@click.option(
    "--target",
    metavar="DEVICE",
    help="Compare with the cost model's estimate of the model's rate on this device (as `flowrate "
    "compile --target` takes, e.g. h100) instead of measuring it here.",
)
@click.option(
    "--max-workers",
    type=click.IntRange(0, int(BOUNDS["loader_workers"].high)),
    help="Most loader workers to try. [default: the cores (less one beyond two), at most the shards]",
)
@click.option(
    "--prefetch-depths",
    default="2,4",
    show_default=True,
    metavar="N,N",
    help="Prefetch depths to try with each worker count.",
)
@click.option(
    "--seconds",
    "each_s",
    type=FiniteRange(min=0, max=WEEK_S, min_open=True),
    default=1.0,
    show_default=True,
    help="Seconds to time each loader configuration.",
)
@click.option(
    "--sample-cost",
    "sample_cost_s",
    type=FiniteRange(min=0),
    default=0.0,
    hidden=True,
    help="Seconds of artificial cost per sample.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON on stdout.")
def command(
    consumption_rate: float | None,
    target: str | None,
    max_workers: int | None,
    prefetch_depths: str,
    each_s: float,
    sample_cost_s: float,
    as_json: bool,
    sample_shape: int | None,
    **flags: Any,
) -> None:
    """Find how many loader workers keep the model fed.

    Measures the pipeline of --data alone (read, crc32 checks, pinning, copy to the device) with
    0, 1, 2, 4, … workers and each prefetch depth; takes the model's rate from a short synthetic
    run of the same options (or the cost model's estimate for --target, or --consumption-rate);
    predicts each configuration's input-bound share — max(0, 1 − pipeline rate / model rate)
    when workers read while the model computes, model rate / (pipeline rate + model rate) with 0
    workers, where the two take turns — and recommends the smallest configuration under 5%, or
    says by how much the best one falls short.
    """
    import json

    from flowrate.cli import analyze_input_text as text
    from flowrate.cli import console
    from flowrate.cli.resolve import resolve_run
    from flowrate.harness import input_advice

    _check_flags(flags)
    depths = input_advice.parse_depths(prefetch_depths)
    if flags["steps"] is None and flags["min_steps"] is None and flags["duration_s"] is None:
        flags["duration_s"] = MODEL_S
    config, problem = resolve_run(flags, sample_shape)
    setup = input_advice.set_up(config, problem, sample_cost_s=sample_cost_s)
    analysis = input_advice.advise(
        setup, _Progress(each_s), consumption_rate, target, max_workers, depths, each_s
    )
    if as_json:
        console.data(json.dumps(analysis.to_dict(), indent=2))
    else:
        rows = text.analysis_rows(analysis)
        console.grid(
            text.title(analysis, setup.data_dir), text.HEADER, rows, right_aligned=text.RIGHT_ALIGNED
        )
    console.status(text.recommendation(analysis))
    if note := text.cpu_note(analysis, setup.data_dir, setup.device.type == "cpu"):
        console.status(note)


def _check_flags(flags: dict[str, Any]) -> None:
    """--data is needed, and the loader options are what the analysis varies."""
    from flowrate.errors import ConfigError
    from flowrate.harness.input_advice import require_dataset

    require_dataset(flags["data_dir"])
    for name in ("loader_workers", "prefetch"):
        if flags[name] is not None:
            raise ConfigError(
                name,
                "analyze-input tries loader configurations itself; use --max-workers and --prefetch-depths",
            )


class _Progress:
    """The analysis's status lines on stderr, as it goes."""

    def __init__(self, each_s: float) -> None:
        self.each_s = each_s

    def measuring(self, setup: InputSetup) -> None:
        from flowrate.cli import analyze_input_text as text
        from flowrate.cli import console

        console.status(text.measuring_line(setup))

    def planned(self, rate: float, source: str, configurations: int) -> None:
        from flowrate.cli import analyze_input_text as text
        from flowrate.cli import console

        console.status(text.plan_line(rate, source, configurations, self.each_s))

    def point(self, point: PipelinePoint) -> None:
        from flowrate.cli import analyze_input_text as text
        from flowrate.cli import console

        console.status(text.point_line(point))
