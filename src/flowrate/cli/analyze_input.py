"""`flowrate analyze-input`: measure the input pipeline alone at several loader configurations,
compare each with the model's consumption rate, and recommend the smallest that keeps up."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from flowrate.cli.run import resolve_run, run_options

if TYPE_CHECKING:
    from flowrate.config import RunConfig
    from flowrate.harness.analyze_input import InputAnalysis, PipelinePoint
    from flowrate.problems.base import Problem

# Seconds of synthetic timing for the model's rate when the user sets no length.
MODEL_SECONDS = 3.0


@click.command("analyze-input")
@run_options
@click.option(
    "--consumption-rate",
    type=click.FloatRange(min=0, min_open=True),
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
    type=click.IntRange(min=0),
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
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Seconds to time each loader configuration.",
)
@click.option(
    "--sample-cost", type=float, default=0.0, hidden=True, help="Seconds of artificial cost per sample."
)
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON on stdout.")
def command(
    consumption_rate: float | None,
    target: str | None,
    max_workers: int | None,
    prefetch_depths: str,
    seconds: float,
    sample_cost: float,
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
    from dataclasses import replace

    from flowrate.cli import console
    from flowrate.config import AUTO
    from flowrate.data.feed import loader_settings, open_dataset
    from flowrate.errors import ConfigError
    from flowrate.harness.analyze_input import analyze_input, candidates, default_max_workers, estimated_rate
    from flowrate.measure.device import resolve_device

    if flags["data_dir"] is None:
        raise ConfigError("data", "analyze-input needs the dataset: give --data DIR")
    for name in ("loader_workers", "prefetch"):
        if flags[name] is not None:
            raise ConfigError(
                name,
                "analyze-input tries loader configurations itself; use --max-workers and --prefetch-depths",
            )
    depths = _depths(prefetch_depths)
    if flags["steps"] is None and flags["min_steps"] is None and flags["duration_s"] is None:
        flags["duration_s"] = MODEL_SECONDS
    config, problem = resolve_run(
        flags, sample_shape, None, lambda c, p: c.for_problem(p.modes, p.default_mode, p.name)
    )
    if config.batch_size == AUTO:
        raise ConfigError("batch_size", "analyze-input needs a fixed --batch-size")
    batch_size = int(config.batch_size or problem.default_batch_size)
    device = resolve_device(config.device)
    assert config.data_dir is not None
    index = open_dataset(config.data_dir, problem)
    settings = replace(loader_settings(config, batch_size, device), sample_cost_s=sample_cost)
    if consumption_rate is not None and target is not None:
        raise ConfigError("target", "give --target or --consumption-rate, not both")
    if consumption_rate is not None:
        source = "given (--consumption-rate)"
    elif target is not None:
        consumption_rate, source = estimated_rate(config, problem, batch_size, target)
    else:
        consumption_rate, source = _model_rate(config, problem)
    limit = default_max_workers(len(index.shards), 1) if max_workers is None else max_workers
    if limit > len(index.shards):
        raise ConfigError(
            "max_workers", f"{config.data_dir} has {len(index.shards)} shards: at most that many workers"
        )
    configurations = candidates(limit, depths)
    console.status(
        f"model: {consumption_rate:.4g} samples/s ({source}); timing the loader alone at "
        f"{len(configurations)} configurations, {seconds:g} s each"
    )
    analysis = analyze_input(
        config.data_dir,
        index,
        settings,
        device,
        consumption_rate,
        source,
        configurations=configurations,
        seconds=seconds,
        on_point=lambda p: console.status(point_line(p)),
    )
    if as_json:
        console.data(json.dumps(analysis.to_dict(), indent=2))
    else:
        console.grid(
            f"input pipeline of {config.data_dir} against {consumption_rate:.4g} samples/s",
            ["workers", "prefetch", "pipeline samples/s", "predicted input-bound", ""],
            analysis_rows(analysis),
            right_aligned=(0, 1, 2, 3),
        )
    console.status(recommendation(analysis))
    if device.type == "cpu" and analysis.recommended is not None and analysis.recommended.workers:
        console.status(
            "on a CPU device the loader workers share the cores with the model, which this prediction "
            f"leaves out: confirm with `flowrate run --data {config.data_dir} --loader-workers "
            f"{analysis.recommended.workers}` and the same options"
        )


def _depths(text: str) -> list[int]:
    from flowrate.errors import ConfigError

    try:
        depths = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ConfigError("prefetch_depths", f"expected numbers like 2,4, got {text!r}") from None
    if not depths or depths[0] < 1:
        raise ConfigError("prefetch_depths", f"expected positive numbers like 2,4, got {text!r}")
    return depths


def _model_rate(config: RunConfig, problem: Problem) -> tuple[float, str]:
    from flowrate.cli import console
    from flowrate.data.make import problem_label
    from flowrate.harness.analyze_input import consumption_rate

    console.status(
        f"measuring {problem_label(problem)}'s rate with synthetic data ({config.settled_mode}, "
        f"{config.precision.value}, batch {config.batch_size or problem.default_batch_size})"
    )
    return consumption_rate(config, problem)


def point_line(point: PipelinePoint) -> str:
    prefetch = f", prefetch {point.prefetch}" if point.prefetch is not None else ""
    return (
        f"{point.workers} worker(s){prefetch}: {point.samples_per_sec:.4g} samples/s "
        f"({point.batches} batches in {point.seconds:.2f} s)"
    )


def analysis_rows(analysis: InputAnalysis) -> list[list[str]]:
    """One row per configuration: workers, prefetch, pipeline rate, predicted share, a mark."""
    rows = []
    for p in analysis.points:
        mark = (
            "recommended"
            if p is analysis.recommended
            else ("keeps up" if p.predicted_share < analysis.target_share else "")
        )
        rows.append(
            [
                str(p.workers),
                "—" if p.prefetch is None else str(p.prefetch),
                f"{p.samples_per_sec:.4g}",
                f"{p.predicted_share:.1%}",
                mark,
            ]
        )
    return rows


def recommendation(analysis: InputAnalysis) -> str:
    """The verdict in one line: the smallest configuration that keeps up, or the shortfall."""
    chosen = analysis.recommended
    model = f"{analysis.consumption_samples_per_sec:.4g}"
    if chosen is not None:
        prefetch = f" --prefetch {chosen.prefetch}" if chosen.prefetch is not None else ""
        return (
            f"recommended: --loader-workers {chosen.workers}{prefetch}: the pipeline delivers "
            f"{chosen.samples_per_sec:.4g} samples/s, the model consumes {model}; predicted input-bound "
            f"share {chosen.predicted_share:.1%} (under {analysis.target_share:.0%})"
        )
    best = analysis.best
    prefetch = f", prefetch {best.prefetch}" if best.prefetch is not None else ""
    return (
        f"no configuration here keeps the input-bound share under {analysis.target_share:.0%}: the "
        f"pipeline delivers at most {best.samples_per_sec:.4g} samples/s "
        f"({best.workers} worker(s){prefetch}), "
        f"the model consumes {model}: {analysis.shortfall or 0:.2f}x short (predicted share "
        f"{best.predicted_share:.1%}); use more cores or shards, or store the data closer to what the "
        "model takes"
    )
