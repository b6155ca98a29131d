"""`flowrate estimate`: the compile report and its throughput estimate, on this device or a target;
--calibrate measures this device's rates; --check sets predictions beside recorded measurements."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from flowrate.cli.options import STORE_HELP, host_memory_option, run_options, target_option

if TYPE_CHECKING:
    from flowrate.config import RunConfig
    from flowrate.estimate.check import EstimateCheck

# Share of a CPU other processes may use during a calibration before it is called disturbed.
DISTURBED = 0.1
# Run options that also select recorded runs under --check (as `flowrate runs` filters).
_SHARED_FILTERS = ("problem", "device", "precision", "mode", "execution")
# The options that only --check takes, with their flags, as a mistake names them.
_CHECK_ONLY = {"store": "--store", "tag": "--tag", "sweep": "--sweep", "since": "--since", "until": "--until"}


@click.command("estimate")
@run_options
@target_option
@host_memory_option
@click.option("--json", "as_json", is_flag=True, help="Print the report (or the check) as JSON on stdout.")
@click.option(
    "-o",
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Also write compile_report.txt and compile_report.json to this folder.",
)
@click.option(
    "--calibrate",
    is_flag=True,
    help="First measure this device's GEMM, convolution and attention FLOP/s, copy bandwidth and "
    "per-op overhead (about 15 s on a CPU) and keep them for every later estimate.",
)
@click.option(
    "--check",
    is_flag=True,
    help="Instead, print predicted against measured samples/s for recorded runs: RUN ids, tags or "
    "files, or the filters --problem --device --precision --mode --execution --tag --sweep --since "
    "--until; for a run profiled with --profile, predicted against measured per operator class.",
)
@click.option(
    "--attention",
    type=click.Choice(["native", "fused", "explicit"]),
    help="How attention is priced: as the device runs flowrate's models (the default: the CPU's "
    "own path, a GPU's fused kernel), fused, or explicit (matmul, scale, mask, softmax, dropout, "
    "matmul, as implementations without a fused kernel compute it).",
)
@click.argument("refs", nargs=-1, metavar="[RUN|TAG|FILE]...")
@click.option("--store", type=click.Path(dir_okay=False), help="--check: " + STORE_HELP)
@click.option("--tag", help="--check: only runs with this tag.")
@click.option("--sweep", help="--check: only runs of this sweep.")
@click.option("--since", help="--check: only runs from this date or time on.")
@click.option("--until", help="--check: only runs up to this date or time.")
def command(
    target: str | None,
    host_memory: float | None,
    as_json: bool,
    out_dir: str | None,
    calibrate: bool,
    check: bool,
    attention: str | None,
    refs: tuple[str, ...],
    sample_shape: int | None,
    **flags: Any,
) -> None:
    """Estimate samples/s before running: the compile report with a roofline cost model.

    Every op of one step is traced on the meta device and priced at the larger of its FLOPs over
    the achieved FLOP/s and its bytes over the achieved bandwidth, plus a launch overhead; the
    rates are the datasheet peaks of --target (any device in the peak table, present or not)
    scaled by efficiency measured with --calibrate where that device was calibrated. A CPU has no
    datasheet peak: calibrate it first. With --check, recorded runs' predictions (every run
    records one) are set against what they measured.
    """
    import json
    from pathlib import Path

    from flowrate.cli import console
    from flowrate.cli.estimate_text import report_lines
    from flowrate.cli.resolve import resolve_run
    from flowrate.estimate.report import report_for, save_report

    selection = {name: flags.pop(name) for name in _CHECK_ONLY}
    if check:
        _check(refs, selection, as_json, sample_shape, flags)
        return
    given = (["refs"] if refs else []) + [_CHECK_ONLY[name] for name, value in selection.items() if value]
    if given:
        raise click.UsageError(f"{', '.join(given)} select recorded runs: add --check")
    config, problem = resolve_run(flags, sample_shape)
    if calibrate:
        _calibrate(config)
    batch_size = problem.default_batch_size if config.batch_size in (None, "auto") else int(config.batch_size)
    host_capacity = host_memory * 2**30 if host_memory is not None else None
    report = report_for(
        config,
        problem,
        target=target,
        batch_size=batch_size,
        host_capacity=host_capacity,
        attention=attention,
    )
    lines = report_lines(report)
    if out_dir:
        text, _ = save_report(report, lines, Path(out_dir))
        console.status(f"compile report written to {text} (and .json)")
    console.data(json.dumps(report.to_dict(), indent=2) if as_json else "\n".join(lines))


def _calibrate(config: RunConfig) -> None:
    from flowrate.cli import console
    from flowrate.estimate.calibrating import calibrate_and_save

    def starting(device: str, threads: int) -> None:
        console.status(f"calibrating {device} ({threads} threads): about 15 s on a CPU")

    calibration, path = calibrate_and_save(
        config.device, config.threads, on_start=starting, on_point=console.status
    )
    console.status(f"calibration of {calibration.device} saved in {path}")
    if calibration.disturbed > DISTURBED:
        console.warn(
            f"other processes used {calibration.disturbed:.0%} of a CPU while calibrating: the rates may be "
            "low; calibrate again on a quiet machine"
        )
    if calibration.speed_note:
        console.warn(
            f"{calibration.speed_note} (a reference model's training step, timed at the start and the "
            "end): the rates mix two speeds; calibrate again"
        )


def _check(
    refs: tuple[str, ...],
    selection: dict[str, str | None],
    as_json: bool,
    sample_shape: int | None,
    flags: dict[str, Any],
) -> None:
    """--check: select the runs the references or filters name, check them, show the check."""
    from flowrate.cli.select import select_runs
    from flowrate.estimate.check import check_estimates
    from flowrate.results.store_filter import RunFilter

    stray = [
        name
        for name, value in flags.items()
        if value not in (None, (), False) and name not in _SHARED_FILTERS
    ]
    if sample_shape is not None:
        stray.append("sample_shape")
    if stray:
        flag = stray[0].replace("_", "-")
        raise click.UsageError(f"--{flag} does not select runs; --check takes runs, tags, files or filters")
    where = RunFilter(
        **{name: flags.get(name) for name in _SHARED_FILTERS},
        tag=selection["tag"],
        sweep=selection["sweep"],
        since=selection["since"],
        until=selection["until"],
    )
    _show_check(check_estimates(select_runs(selection["store"], refs, where)), as_json)


def _show_check(checked: EstimateCheck, as_json: bool) -> None:
    """The check as JSON, or as tables: the runs, each profiled run's operator classes, each
    machine's drift."""
    import json

    from flowrate.cli import console, estimate_text
    from flowrate.cli.op_check_text import OPERATOR_HEADER, check_table

    if as_json:
        console.data(json.dumps(estimate_text.check_json(checked), indent=2))
        return
    rows = estimate_text.check_rows(checked.runs)
    console.grid(
        "predicted against measured samples/s", estimate_text.CHECK_HEADER, rows, right_aligned=(4, 6, 7, 8)
    )
    for line in estimate_text.check_summary(checked.runs):
        console.detail(line)
    for title, operator_rows, line in map(check_table, checked.operators):
        if operator_rows:
            console.grid(title, OPERATOR_HEADER, operator_rows, right_aligned=(1, 2, 3, 4))
        console.detail(line if operator_rows else f"{title}: {line}")
    for title, drift_rows, line in estimate_text.drift_tables(checked.machines):
        console.grid(title, estimate_text.DRIFT_HEADER, drift_rows, right_aligned=(3, 4, 5))
        console.detail(line)
