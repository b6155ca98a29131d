"""`flowrate serve-bench`: load tests of a running server speaking the OpenAI API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from flowrate.cli.options import output_options
from flowrate.cli.serve_options import config_from, serve_options

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from flowrate.cli.destination import Destination
    from flowrate.serving.load_test import LoadSweep, LoadTest
    from flowrate.serving.plan import Plan


@click.command("serve-bench")
@serve_options
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
    """Load-test a server speaking the OpenAI API (vLLM, SGLang, TGI, llama.cpp, Ollama,
    transformers serve): TTFT, TPOT, ITL and E2E with confidence intervals, throughput, errors and
    goodput, each under flowrate's, vLLM's and genai-perf's definitions from one raw trace."""
    import sys

    from flowrate.cli import console
    from flowrate.cli.destination import Destination
    from flowrate.errors import RunFailed

    _require_client()
    from flowrate.serving import plan as serving_plan
    from flowrate.serving.load_test import LoadSweep, run_load_test

    config = config_from(flags)
    plan = serving_plan.resolve(config)
    _check_outputs(plan.loads is not None, out, as_json, config.plot_path)
    destination = Destination.open(store, tags, no_store, out, quiet, as_json)
    console.status(plan.start_line(), quiet)
    done = run_load_test(plan, config.max_error_rate, sys.argv, lambda line: console.status(line, quiet))
    if isinstance(done, LoadSweep):
        _show_sweep(done, plan, destination, quiet, config.plot_path)
    else:
        _show_load(done, destination, quiet, config.plot_path)
    if done.interrupted:
        raise KeyboardInterrupt  # what was measured is recorded, partial: exit 130
    if done.failure:
        raise RunFailed(done.failure)


def _require_client() -> None:
    """The load test's HTTP client comes from the serve extra: without it, one line."""
    from flowrate.errors import ConfigError

    try:
        import aiohttp  # noqa: F401
    except ImportError:
        raise ConfigError("serve-bench", "needs aiohttp: pip install 'flowrate[serve]'") from None


def _check_outputs(sweep: bool, out: str | None, as_json: bool, plot_path: str | None) -> None:
    """--out, --json and --plot refused before any request when they cannot be written."""
    from flowrate.cli.paths import check_out
    from flowrate.errors import ConfigError

    if sweep:
        for given, flag in ((out, "--out"), (as_json, "--json")):
            if given:
                raise ConfigError(
                    flag, "a sweep records each load as a run of its own: read them from the store"
                )
    if out:
        check_out(out)
    if plot_path:
        check_out(plot_path, "plot")
        _plot_format(plot_path)


def _show_load(done: LoadTest, destination: Destination, quiet: bool, plot_path: str | None) -> None:
    """Record and show the run (its search's points too), then its figure."""
    from flowrate.cli import serve_bench_text

    title = f"flowrate serve-bench {done.result.run_id}"
    destination.report(done.result, title, serve_bench_text.rows(done.section))
    if plot_path:
        from flowrate.analysis.plots_serving import serving_figure

        _plot(serving_figure(done.section, title), plot_path, quiet)


def _show_sweep(
    done: LoadSweep, plan: Plan, destination: Destination, quiet: bool, plot_path: str | None
) -> None:
    """Record each point as its run, show the curve's table, then its figure."""
    from flowrate.cli import console, serve_bench_text

    destination.record_all(list(done.results))
    if not quiet:
        header, rows = serve_bench_text.curve_table(list(done.curve), [r.run_id for r in done.results])
        console.grid(
            f"serve-bench sweep ({done.stopped})",
            header,
            rows,
            right_aligned=range(1, 6),
            to_stdout=False,
            whole=(0, 7),
        )
    if plot_path:
        from flowrate.analysis.plots_serving import sweep_figure

        title = f"serve-bench sweep at {plan.target.url}"
        _plot(sweep_figure(list(done.curve), plan.slo or {}, title), plot_path, quiet)


def _plot_format(path: str) -> str:
    """The image format --plot's suffix names, refused before any request when unknown."""
    from flowrate.analysis.plots import format_for
    from flowrate.errors import ConfigError, FlowrateError

    try:
        return format_for(path)
    except FlowrateError as error:
        raise ConfigError("--plot", str(error)) from None


def _plot(figure: Figure, path: str, quiet: bool) -> None:
    from flowrate.analysis.plots import render
    from flowrate.cli import console
    from flowrate.io import write_atomic

    write_atomic(path, render(figure, _plot_format(path)))
    console.status(f"plot written to {path}", quiet)
