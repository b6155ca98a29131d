"""Plots: each kind drawn from known figures, saved at its fixed size, and `flowrate plot` end to end."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import matplotlib
import pytest
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.figure import Figure
from matplotlib.patches import Polygon, Rectangle

from factories import make_result
from flowrate.analysis import canvas, plots
from flowrate.analysis.pareto import pareto_front, parse_objective
from flowrate.analysis.plots_pareto import pareto_scatter
from flowrate.analysis.plots_scaling import scaling_figure
from flowrate.campaigns.scaling.run import efficiency
from flowrate.errors import FlowrateError
from flowrate.measure.stats import summarize
from flowrate.results.schema import Result
from flowrate.results.store import Store, StoredRun


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the PNG's IHDR chunk, which always comes first."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def sweep(precisions: tuple[str, ...] = ("fp32", "bf16"), energy: bool = True) -> list[StoredRun]:
    """Batch sizes 8…64 at each precision, out of order, with energy and memory growing with batch."""
    runs = []
    for factor, precision in enumerate(precisions, start=1):
        for batch in (32, 8, 64, 16):
            result = make_result(
                100.0 * factor * batch,
                batch_size=batch,
                precision=precision,
                samples_per_joule=factor * batch / 4 if energy else None,
                peak_memory_bytes=batch * 1_000_000 // factor,
            )
            runs.append(StoredRun.from_result(result, ["sweep"]))
    return runs


@pytest.mark.parametrize(
    "draw",
    [
        lambda: plots.throughput_vs_batch(sweep()),
        lambda: plots.samples_per_joule_vs_batch(sweep()),
        lambda: pareto_scatter(
            pareto_front(sweep(), [parse_objective("samples_per_sec"), parse_objective("peak_memory_bytes")])
        ),
        lambda: plots.rate_over_time(make_result(checkpoint_after=(1,))),
        lambda: plots.comparison_bars([("a", [make_result(100.0)]), ("b", [make_result(120.0)])]),
        lambda: scaling_figure(
            efficiency([(1, make_result(100.0)), (2, make_result(180.0))], "tiny", None), "weak scaling tiny"
        ),
    ],
    ids=["throughput", "energy", "pareto", "rate", "compare", "scaling"],
)
def test_every_plot_saves_as_png_and_svg_at_the_fixed_size(draw, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fig = draw()
    assert isinstance(fig, Figure)
    png = plots.save(fig, tmp_path / "plot.png")
    svg = plots.save(fig, tmp_path / "plot.SVG")  # the suffix's case does not matter
    assert png_size(png) == (canvas.WIDTH_PX, canvas.HEIGHT_PX) == (1600, 1000)
    assert png.stat().st_size > 10_000
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "</svg>" in text
    assert re.search(r'<svg[^>]* width="576pt" height="360pt"', text)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plot.SVG", "plot.png"]  # no temp files left


def test_plots_leave_pyplot_and_the_backend_alone() -> None:
    """A user's notebook keeps its figures and its backend after flowrate draws."""
    backend = matplotlib.get_backend()
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    plots.render(plots.throughput_vs_batch(sweep()), "svg")
    plots.render(plots.rate_over_time(make_result()))
    assert plt.get_fignums() == before
    assert matplotlib.get_backend() == backend


def test_save_refuses_other_formats_and_writes_nothing(tmp_path: Path) -> None:
    fig = plots.rate_over_time(make_result())
    with pytest.raises(FlowrateError, match=r"\.png or \.svg"):
        plots.save(fig, tmp_path / "plot.pdf")
    with pytest.raises(FlowrateError, match=r"\.png or \.svg"):
        plots.save(fig, tmp_path / "plot")
    assert list(tmp_path.iterdir()) == []


def test_save_replaces_a_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "plot.png"
    target.write_bytes(b"old")
    plots.save(plots.rate_over_time(make_result()), target)
    assert png_size(target) == (1600, 1000)
    assert [p.name for p in tmp_path.iterdir()] == ["plot.png"]


def test_throughput_has_one_line_per_configuration_sorted_by_batch_with_error_bars() -> None:
    runs = sweep()
    fig = plots.throughput_vs_batch(runs)
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
    assert set(lines) == {"fp32", "bf16"}  # what varies is in the legend; the rest is in the title
    assert "fc_mnist/debug" in ax.get_title() and "Test CPU" in ax.get_title()
    assert list(lines["fp32"].get_xdata()) == [8, 16, 32, 64]
    assert list(lines["bf16"].get_ydata()) == pytest.approx([1600.0, 3200.0, 6400.0, 12800.0])
    assert ax.get_xscale() == "log"
    # each point's error bar is half its CI of the mean interval rate, around the plotted GlobalRate
    bars = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert len(bars) == 2
    ends = {(s[0][0], round(s[0][1], 6), round(s[1][1], 6)) for c in bars for s in c.get_segments()}
    assert len(ends) == 8
    first = runs[1].result  # fp32 at batch 8: GlobalRate 800
    low, high = first.summary.ci95_low_samples_per_sec, first.summary.ci95_high_samples_per_sec
    assert low is not None and high is not None
    assert (8, round(800 - (high - low) / 2, 6), round(800 + (high - low) / 2, 6)) in ends


def of_problem(problem: str, rate: float, batch: int, memory: int = 100_000_000) -> StoredRun:
    return StoredRun.from_result(
        make_result(rate, batch_size=batch, problem=problem, peak_memory_bytes=memory)
    )


def test_problems_never_share_an_axis_each_has_a_panel_of_its_own() -> None:
    """An MLP at 50 k samples/s and ResNet-50 at 500 are not one comparison: one panel each."""
    runs = [of_problem("fc_mnist", 50_000.0 * b / 8, b) for b in (8, 16)]
    runs += [of_problem("resnet", 500.0 * b / 8, b) for b in (8, 16, 32)]
    fig = plots.throughput_vs_batch(runs)
    assert len(fig.axes) == 2
    mnist, resnet = fig.axes
    assert mnist.get_title().startswith("fc_mnist/debug") and resnet.get_title().startswith("resnet/debug")
    [mnist_line] = [line for line in mnist.get_lines() if not line.get_label().startswith("_")]
    [resnet_line] = [line for line in resnet.get_lines() if not line.get_label().startswith("_")]
    assert list(mnist_line.get_xdata()) == [8, 16] and list(resnet_line.get_xdata()) == [8, 16, 32]
    assert resnet.get_ylim()[1] < 10_000 < mnist.get_ylim()[1]  # each on its own scale
    assert fig.get_suptitle().startswith("samples/s against batch size: one panel per problem")
    assert png_size(plots.save(fig, Path(fig_dir()) / "two.png")) == (canvas.WIDTH_PX, canvas.HEIGHT_PX)


def fig_dir() -> str:
    import tempfile

    return tempfile.mkdtemp()


def test_more_problems_than_a_figure_holds_are_refused_by_name() -> None:
    runs = [of_problem(f"p{n}", 100.0, 8) for n in range(canvas.MAX_FACETS + 1)]
    with pytest.raises(
        FlowrateError, match=r"the runs are of 10 problems; a figure shows at most 9.*--problem"
    ):
        plots.throughput_vs_batch(runs)
    assert len(plots.throughput_vs_batch(runs[:-1]).axes) == canvas.MAX_FACETS


def test_other_metrics_have_no_error_bars_and_runs_without_the_metric_are_left_out() -> None:
    runs = [*sweep(), StoredRun.from_result(make_result(batch_size=128, samples_per_joule=None), [])]
    fig = plots.throughput_vs_batch(runs, "samples_per_joule")
    ax = fig.axes[0]
    assert not [c for c in ax.collections if isinstance(c, LineCollection)]
    assert all(128 not in line.get_xdata() for line in ax.get_lines())
    assert ax.get_ylabel() == "samples/J"


def test_energy_without_any_reading_says_why() -> None:
    with pytest.raises(FlowrateError, match=r"no run records samples/J.*NVML.*RAPL"):
        plots.samples_per_joule_vs_batch(sweep(energy=False))


def test_text_from_records_is_drawn_literally_never_as_mathtext(tmp_path: Path) -> None:
    """'$x$' would be set as math, and '$\\frac{$' would stop the drawing with a parse error."""
    odd = make_result(problem=r"$\frac{$ cost $5", size="$x$")
    fig = plots.throughput_vs_batch([odd])
    assert plots.save(fig, tmp_path / "odd.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert r"\$\frac{\$ cost \$5/\$x\$" in fig.axes[0].get_title()
    bars = plots.comparison_bars([("$x$ tag", [odd])])
    plots.save(bars, tmp_path / "bars.svg")
    assert [t.get_text() for t in bars.axes[0].get_xticklabels()] == [r"\$x\$ tag"]
    plots.save(plots.rate_over_time(odd), tmp_path / "rate.png")


def test_pareto_scatter_highlights_the_frontier_and_draws_its_staircase() -> None:
    # memory rises with batch; throughput too, except batch 64 of fp32, which bf16 beats on both
    runs = sweep()
    ranking = pareto_front(runs, [parse_objective("samples_per_sec"), parse_objective("peak_memory_bytes")])
    fig = pareto_scatter(ranking)
    ax = fig.axes[0]
    points = {c.get_label(): c for c in ax.collections if isinstance(c, PathCollection)}
    assert points.keys() == {f"frontier ({len(ranking.front)})", f"dominated ({len(ranking.dominated)})"}
    front = sorted(ranking.values[r.run_id] for r in ranking.front)
    [stairs] = [line for line in ax.get_lines() if line.get_drawstyle() == "steps-pre"]
    assert list(stairs.get_xdata()) == [x for x, _ in front]
    assert list(stairs.get_ydata()) == [y for _, y in front]
    assert "higher is better" in ax.get_xlabel() and "lower is better" in ax.get_ylabel()
    assert [t.get_text() for t in ax.texts]  # frontier points labelled by batch size


def test_pareto_scatter_ranks_and_draws_each_problem_in_its_own_panel() -> None:
    # the MLP beats every ResNet run on both axes; ranked apart, each problem has its frontier
    runs = [of_problem("fc_mnist", 9000.0, 8, 10_000_000), of_problem("fc_mnist", 8000.0, 16, 12_000_000)]
    runs += [of_problem("resnet", 300.0, 8, 400_000_000), of_problem("resnet", 500.0, 16, 600_000_000)]
    ranking = pareto_front(runs, [parse_objective("samples_per_sec"), parse_objective("peak_memory_bytes")])
    fig = pareto_scatter(ranking)
    mnist, resnet = fig.axes
    assert (mnist.get_title(), resnet.get_title()) == ("fc_mnist/debug", "resnet/debug")
    labels = [{c.get_label() for c in ax.collections if isinstance(c, PathCollection)} for ax in fig.axes]
    assert labels == [{"frontier (1)", "dominated (1)"}, {"frontier (2)"}]
    assert "Pareto frontier: max samples/s against min peak memory" in fig.get_suptitle()


def test_pareto_scatter_needs_two_different_objectives() -> None:
    one = pareto_front(sweep(), [parse_objective("samples_per_sec")])
    with pytest.raises(FlowrateError, match="two objectives"):
        pareto_scatter(one)
    two = pareto_front(sweep(), [parse_objective("samples_per_sec"), parse_objective("samples_per_joule")])
    with pytest.raises(FlowrateError, match="not an objective"):
        pareto_scatter(two, y=parse_objective("peak_memory_bytes"))


def test_rate_over_time_shows_rate_global_rate_and_marks_checkpoints() -> None:
    result = make_result(interval_rates=[100.0, 120.0, 110.0, 90.0], checkpoint_after=(1,))
    ax = plots.rate_over_time(result).axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"interval (local)", "Rate (smoothed)", "GlobalRate"}
    assert list(lines["interval (local)"].get_ydata()) == [100.0, 120.0, 110.0, 90.0]
    assert list(lines["GlobalRate"].get_ydata()) == [i.global_samples_per_sec for i in result.intervals]
    checkpoint = next(i for i in result.intervals if i.kind == "checkpoint")
    spans = [p for p in ax.patches if isinstance(p, Polygon | Rectangle) and p.get_label() == "checkpoint"]
    assert len(spans) == 1
    xs = [x for x, _ in spans[0].get_xy()] if isinstance(spans[0], Polygon) else [spans[0].get_x()]
    assert min(xs) == pytest.approx(checkpoint.elapsed_s - checkpoint.seconds)
    assert ax.get_ylim()[0] == 0


def test_a_run_of_one_sample_point_is_drawn_as_marks_not_empty_axes() -> None:
    result = make_result(interval_rates=[100.0])
    fig = plots.rate_over_time(result)
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {"interval (local)", "Rate (smoothed)", "GlobalRate"}
    assert all(len(line.get_xdata()) == 1 for line in lines.values())
    shapes = {label: line.get_marker() for label, line in lines.items()}
    assert shapes == {"interval (local)": "o", "Rate (smoothed)": "D", "GlobalRate": "s"}  # told apart
    assert all(line.get_markersize() >= 5 for line in lines.values())
    x = lines["GlobalRate"].get_xdata()[0]
    assert 0 < x < ax.get_xlim()[1]  # inside the frame, not on its edge
    assert any("one sample point" in t.get_text() for t in fig.texts)
    # several sample points: lines, no marks on Rate and GlobalRate, no note
    many = plots.rate_over_time(make_result(interval_rates=[100.0, 110.0]))
    assert {line.get_marker() for line in many.axes[0].get_lines()[1:]} == {"None"}
    assert not many.texts


def test_comparison_bars_count_processes_not_intervals() -> None:
    # two runs: one value each (its median interval rate), the CI Student's t over the two
    a = [make_result(interval_rates=[100.0, 104.0]), make_result(interval_rates=[98.0, 102.0])]
    b = [make_result(interval_rates=[150.0, 160.0, 155.0])]
    bars = plots.bar_statistics([("A", a), ("B", b)], "samples_per_sec")
    over_runs = summarize([102.0, 100.0])
    assert (bars[0].label, bars[0].n, bars[0].mean, bars[0].within_run) == (
        "A",
        2,
        pytest.approx(101.0),
        False,
    )
    assert (bars[0].ci95_low, bars[0].ci95_high) == (
        pytest.approx(over_runs.ci95_low),
        pytest.approx(over_runs.ci95_high),
    )
    # one run: its value, and the CI of its own intervals, marked as such
    steady = summarize([150.0, 160.0, 155.0])
    assert (bars[1].n, bars[1].mean, bars[1].within_run) == (3, 155.0, True)
    assert (bars[1].ci95_low, bars[1].ci95_high) == (
        pytest.approx(steady.ci95_low),
        pytest.approx(steady.ci95_high),
    )
    fig = plots.comparison_bars([("A", a), ("B", b)])
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches if isinstance(p, Rectangle)]
    assert heights == pytest.approx([101.0, 155.0])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["A", "B"]
    assert any("1 run, 3 intervals" in t.get_text() for t in ax.texts)
    assert any("processes per group" in t.get_text() for t in fig.texts)


def test_comparison_bars_pool_run_figures_where_there_are_no_interval_values() -> None:
    runs: list[Result] = [make_result(samples_per_joule=v) for v in (2.0, 4.0)]
    [bar] = plots.bar_statistics([("energy", runs)], "samples_per_joule")
    assert (bar.n, bar.mean) == (2, 3.0)
    with pytest.raises(FlowrateError, match="'plain' records no samples/J"):
        plots.comparison_bars([("energy", runs), ("plain", [make_result()])], "samples_per_joule")


# --- `flowrate plot` ------------------------------------------------------------------------------


@pytest.fixture
def stored() -> list[StoredRun]:
    """The sweep, recorded in this test's store (tag 'sweep'), plus one bf16 run tagged 'other'."""
    runs = sweep()
    with Store() as store:
        for run in runs:
            store.add(run.result, ["sweep", run.precision or ""])
        store.add(
            make_result(5000.0, precision="bf16", checkpoint_after=(2,), run_id="0123456789ab"), ["other"]
        )
    return runs


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (["throughput", "sweep"], "t.png"),
        (["throughput", "--precision", "bf16", "--metric", "peak_memory_bytes"], "t.svg"),
        (["energy", "--tag", "sweep"], "e.png"),
        (["pareto", "sweep", "--x", "samples_per_sec", "--y", "peak_memory_bytes:min"], "p.png"),
        (["pareto", "sweep"], "p.svg"),
        (["rate", "0123456789ab"], "r.png"),
        (["compare", "fp32", "bf16", "other"], "c.png"),
        (["compare", "--precision", "fp32", "--metric", "samples_per_joule"], "c.svg"),
    ],
)
def test_the_cli_writes_each_kind(run_cli, stored, tmp_path: Path, args: list[str], name: str) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / name
    outcome = run_cli("plot", *args, "--out", str(out))
    assert outcome.code == 0, outcome.stderr
    assert f"plot written to {out}" in outcome.stderr
    if name.endswith(".png"):
        assert png_size(out) == (1600, 1000)
    else:
        assert "</svg>" in out.read_text()


def test_the_cli_defaults_to_a_png_named_after_the_kind(run_cli, stored, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    outcome = run_cli("plot", "throughput")
    assert outcome.code == 0, outcome.stderr
    assert png_size(tmp_path / "flowrate-throughput.png") == (1600, 1000)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["rate", "sweep"], 2, "the rate plot shows one run; 8 were selected"),
        (["throughput", "--out", "x.pdf"], 2, r"name a \.png or \.svg file"),
        (["pareto", "--metric", "mfu"], 2, "--metric applies to the throughput and compare plots"),
        (["throughput", "--x", "mfu"], 2, "--x and --y apply to the pareto plot"),
        (["throughput", "--metric", "speed"], 2, "unknown metric 'speed'"),
        (["energy", "other"], 2, "no run records samples/J"),
        (["bars"], 2, "'bars' is not one of"),
        (["throughput", "sweep", "--tag", "sweep"], 2, "not both"),
    ],
)
def test_the_cli_refuses_what_it_cannot_draw(  # type: ignore[no-untyped-def]
    run_cli, stored, tmp_path: Path, monkeypatch, args: list[str], code: int, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    outcome = run_cli("plot", *args)
    assert outcome.code == code, outcome.stderr
    assert re.search(message, outcome.stderr), outcome.stderr
    assert "Traceback" not in outcome.stderr
    assert list(tmp_path.iterdir()) == []
