"""`flowrate serve-bench`: load tests of a running server speaking the OpenAI API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from flowrate.cli.options import output_options
from flowrate.cli.serve_options import config_from, serve_options
from flowrate.config.serve import ServeConfig

if TYPE_CHECKING:
    from flowrate.results.serving import Serving


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

    from flowrate.cli import console, serve_bench_text
    from flowrate.cli.destination import Destination
    from flowrate.cli.paths import check_out
    from flowrate.errors import ConfigError, RunFailed

    try:
        import aiohttp  # noqa: F401  (the client's library, from the serve extra)
    except ImportError:
        raise ConfigError("serve-bench", "needs aiohttp: pip install 'flowrate[serve]'") from None
    from flowrate.results.serving import Serving
    from flowrate.serving import plan as serving_plan

    config = config_from(flags)
    plan = serving_plan.resolve(config)
    if plan.loads is not None:
        for given, flag in ((out, "--out"), (as_json, "--json")):
            if given:
                raise ConfigError(
                    flag, "a sweep records each load as a run of its own: read them from the store"
                )
    if out:
        check_out(out)
    if config.plot_path:
        check_out(config.plot_path, "plot")
        _plot_format(config.plot_path)
    destination = Destination.open(store, tags, no_store, out, quiet, as_json)
    console.status(plan.start_line(), quiet)
    if plan.loads is not None:
        _sweep(plan, destination, config, quiet)
        return
    result = serving_plan.execute(plan, sys.argv, lambda line: console.status(line, quiet))
    section = result.serving or Serving()
    title = f"flowrate serve-bench {result.run_id}"
    rows = serve_bench_text.rows(section)
    if section.search is not None:
        rows += serve_bench_text.search_rows(section.search)
    destination.report(result, title, rows)
    if config.plot_path:
        _plot(section, title, config.plot_path, quiet)
    if section.partial:
        raise KeyboardInterrupt  # recorded as partial; the boundary says "interrupted", exit 130
    if section.search is not None:  # its points count failed requests as missing the SLO
        if section.search.max_rate is None:
            raise RunFailed(f"no rate met the SLO ({section.search.stopped}); every point is recorded")
        return
    failure = serve_bench_text.failure(section, config.max_error_rate)
    if failure:
        raise RunFailed(failure)


def _sweep(plan: Any, destination: Any, config: ServeConfig, quiet: bool) -> None:
    """Each point recorded as its run, the curve's table, its figure; exit 130 when cut by
    Ctrl-C, 1 when a point failed as a single load fails (serve_bench_text.failure)."""
    import sys

    from flowrate.cli import console, serve_bench_text
    from flowrate.errors import RunFailed
    from flowrate.results.serving import Serving
    from flowrate.serving import sweep_run
    from flowrate.serving.search import INTERRUPTED

    done = sweep_run.execute_sweep(plan, sys.argv, lambda line: console.status(line, quiet))
    if not done.results:
        if done.stopped == INTERRUPTED:
            raise KeyboardInterrupt
        raise RunFailed(f"--budget was spent before the first load ({done.stopped}); no load was sent")
    destination.record_all(done.results)
    if not quiet:
        header, rows = serve_bench_text.curve_table(done.curve, [r.run_id for r in done.results])
        console.grid(
            f"serve-bench sweep ({done.stopped})",
            header,
            rows,
            right_aligned=range(1, 6),
            to_stdout=False,
            whole=(0, 7),
        )
    if config.plot_path:
        from flowrate.analysis.plots import render
        from flowrate.analysis.plots_serving import sweep_figure
        from flowrate.io import write_atomic

        figure = sweep_figure(done.curve, plan.slo or {}, f"serve-bench sweep at {plan.target.url}")
        write_atomic(config.plot_path, render(figure, _plot_format(config.plot_path)))
        console.status(f"plot written to {config.plot_path}", quiet)
    if done.stopped == INTERRUPTED:
        raise KeyboardInterrupt  # the points are recorded, the cut one partial: exit 130
    failures = [
        f"{point.load.label}: {why}"
        for point, result in zip(done.curve, done.results, strict=True)
        if not point.partial
        and (why := serve_bench_text.failure(result.serving or Serving(), config.max_error_rate))
    ]
    if failures:
        raise RunFailed("; ".join(failures))


def _plot_format(path: str) -> str:
    """The image format --plot's suffix names, refused before any request when unknown."""
    from flowrate.analysis.plots import format_for
    from flowrate.errors import ConfigError, FlowrateError

    try:
        return format_for(path)
    except FlowrateError as error:
        raise ConfigError("--plot", str(error)) from None


def _plot(section: Serving, title: str, path: str, quiet: bool) -> None:
    from flowrate.analysis.plots import render
    from flowrate.analysis.plots_serving import serving_figure
    from flowrate.cli import console
    from flowrate.io import write_atomic

    write_atomic(path, render(serving_figure(section, title), _plot_format(path)))
    console.status(f"plot written to {path}", quiet)
