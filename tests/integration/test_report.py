"""`flowrate report`: the HTML page's content, its escaping, and the page as Chromium renders it.

The browser test opens the report in headless Chromium (Debian's `chromium` package, driven by
playwright) with every network request blocked, and checks what a reader would see: each plot
loaded, the tables filled, no console error, no script run. It skips where Chromium is missing,
unless FLOWRATE_REQUIRE_BROWSER=1 (CI sets it, so there it fails instead).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from estimate_factories import cpu_calibration
from factories import make_result
from flowrate.analysis.report import render_report
from flowrate.analysis.report_plots import MAX_RATE_PLOTS
from flowrate.estimate.calibration import save_calibration
from flowrate.harness.survey_bands import make_figure
from flowrate.results.configs import config_from
from flowrate.results.schema import Result
from flowrate.results.sections import Census, FormatFigures, Kind, Operators, Survey
from flowrate.results.store import Store, StoredRun

SCRIPT_TAG = "<script>alert(1)</script>"
IMG_WARNING = "<img src=x onerror=alert(2)> took too long"
HOSTILE_HOST = '"><svg onload=alert(3)>'

CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def crafted() -> list[Result]:
    """Runs no CPU here would give: energy readings, a checkpoint, and hostile text in records."""
    return [
        make_result(
            3000.0 * (1.6 if precision == "bf16" else 1.0) * batch**0.5,
            batch_size=batch,
            precision=precision,
            device_type="cuda",
            device_name="NVIDIA H100 80GB HBM3",
            samples_per_joule=10.0 * batch**0.3,
            peak_memory_bytes=2_000_000_000 + batch * 40_000_000,
            mfu=0.05 * batch**0.3,
            checkpoint_after=(2,) if batch == 32 else (),
            warnings=[IMG_WARNING] if batch == 8 else [],
            environment={"hostname": HOSTILE_HOST},
            created_at=f"2026-11-20T10:{batch:02d}:00+00:00",
        )
        for precision in ("fp32", "bf16")
        for batch in (8, 32, 64)
    ]


def store_crafted(runs: list[Result], tags: tuple[str, ...] = (SCRIPT_TAG, "gpu")) -> None:
    with Store() as store:
        for result in runs:
            store.add(result, tags)


def assert_escaped(page: str) -> None:
    for raw in (SCRIPT_TAG, "<img src=x", "<svg onload"):
        assert raw not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page
    assert "&quot;&gt;&lt;svg onload=alert(3)&gt;" in page
    assert "<script" not in page.lower()  # the report runs no script of its own either


def assert_self_contained(page: str) -> None:
    """Nothing the page would fetch: every src and href is a data: URI or an anchor in the page."""
    references = re.findall(r"""<[^>]*?\s(?:src|href)\s*=\s*["']?([^"' >]+)""", page)
    assert references
    assert all(ref.startswith(("data:", "#")) for ref in references), references
    assert "url(" not in page and "@import" not in page


def test_the_report_escapes_records_and_shows_every_section(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    runs = crafted()
    store_crafted(runs)
    out = tmp_path / "r.html"
    outcome = run_cli("report", "--tag", "gpu", "--out", str(out), "--title", "nightly <b>&</b>")
    assert outcome.code == 0, outcome.stderr
    assert f"report written to {out} (6 runs)" in outcome.stderr
    page = out.read_text()
    assert_escaped(page)
    assert_self_contained(page)
    assert "<title>nightly &lt;b&gt;&amp;&lt;/b&gt;</title>" in page
    for section in ("runs", "pareto", "oracle", "throughput", "energy", "rates", "environment", "warnings"):
        assert f'<section id="{section}">' in page
    assert page.count('<img class="plot" src="data:image/png;base64,') == 4 + len(runs)
    oracle = page.split('<table id="oracle">')[1].split("</table>")[0]
    assert "<th>tied within noise</th>" in oracle
    assert oracle.count("</th>") == oracle.split("</tr>")[1].count("</td>")  # a header per column
    best = oracle.split("<tr>")[2:]
    assert [row.split("<td>")[2].split("</td>")[0] for row in best] == ["bf16", "fp32"]  # one best each
    assert all("batch_size=64" in row and "within one run" in row for row in best)
    for result in runs:
        assert f'<code id="run-{result.run_id}">{result.run_id}</code>' in page
    assert "Environment 1 (6 runs)" in page and "Environment 2" not in page
    assert "2 of 6 runs recorded warnings" in page
    assert out.stat().st_mode & 0o777 == 0o666 & ~_umask()  # readable as any file the user writes


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_the_report_says_what_it_could_not_show(tmp_path: Path) -> None:
    runs = [make_result(100.0 + n, batch_size=8 * (n % 3 + 1)) for n in range(MAX_RATE_PLOTS + 2)]
    page = render_report(runs, title="many")
    rates = page.split('<section id="rates">')[1].split("</section>")[0]
    assert rates.count("<figure>") == MAX_RATE_PLOTS
    assert f"Showing the first {MAX_RATE_PLOTS} of {len(runs)} runs" in page
    assert "No run records samples/J." in page and "no meter in tests" in page
    assert "No run recorded a measurement warning." in page


def test_each_problem_gets_its_own_plots_and_its_own_frontier() -> None:
    """An MLP and a ResNet never share an axis, and the fast MLP does not push ResNet off the frontier."""
    mlp = [make_result(50_000.0 * b, batch_size=b, problem="fc_mnist", run_id=f"a{b:011d}") for b in (8, 16)]
    resnet = [
        make_result(
            500.0 * b, batch_size=b, problem="resnet", peak_memory_bytes=b * 100_000_000, run_id=f"b{b:011d}"
        )
        for b in (8, 16)
    ]
    page = render_report([*mlp, *resnet], title="two problems")
    for section in ("pareto", "throughput"):
        body = page.split(f'<section id="{section}">')[1].split("</section>")[0]
        assert body.count('<img class="plot"') == 2  # a figure per problem
        assert "<h3>fc_mnist/debug</h3>" in body and "<h3>resnet/debug</h3>" in body
    front = page.split('<table id="pareto">')[1].split("</table>")[0]
    assert front.count("<tr>") == 1 + 3  # header; the MLP's best and both ResNets (a trade-off)
    assert "b00000000016" in front and "b00000000008" in front
    assert "ranked within each of the 2 problems" in page
    assert page.count("<figure>") == 4  # Rate over time: one per run, as before


def test_a_run_of_one_sample_point_has_a_rate_plot_with_marks() -> None:
    page = render_report([make_result(interval_rates=[100.0])], title="one")
    rates = page.split('<section id="rates">')[1].split("</section>")[0]
    assert rates.count('<img class="plot"') == 1


def test_report_with_no_runs_is_an_error(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    Store().close()
    outcome = run_cli("report", "--out", str(tmp_path / "r.html"))
    assert outcome.code == 2  # nothing to report on: the selection is the user's to change
    assert "no runs are recorded" in outcome.stderr
    assert not (tmp_path / "r.html").exists()


# --- the page in a browser -------------------------------------------------------------------------


def chromium_or_skip() -> str:
    required = os.environ.get("FLOWRATE_REQUIRE_BROWSER") == "1"
    path = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        path = None
        why = "playwright is not installed (pip install '.[dev]')"
    else:
        why = "no chromium on PATH (Debian: apt-get install chromium)"
    if path is None:
        if required:
            pytest.fail(f"FLOWRATE_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    return path


@dataclass
class Seen:
    """What a page did while it was open: console errors, uncaught errors, dialogs, and the
    requests that would have left the file (blocked)."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    fetched: list[str] = field(default_factory=list)


@contextlib.contextmanager
def opened(executable: str, path: Path) -> Iterator[tuple[Any, Seen]]:
    """``path`` open in headless Chromium, every request but file: and data: blocked."""
    from playwright.sync_api import Request, Route, sync_playwright

    seen = Seen()

    def only_local(route: Route, request: Request) -> None:
        if request.url.startswith(("file:", "data:")):
            route.continue_()
        else:
            seen.fetched.append(request.url)
            route.abort()

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: seen.console_errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda error: seen.page_errors.append(str(error)))
            page.on("dialog", lambda dialog: (seen.dialogs.append(dialog.message), dialog.dismiss()))
            page.route("**/*", only_local)
            page.goto(path.as_uri(), wait_until="load")
            yield page, seen
        finally:
            browser.close()


def record_real_runs(run_cli: Any) -> None:
    for batch in ("8", "16"):
        outcome = run_cli(
            "run", "-p", "fc_mnist", "--size", "debug", "--preheat", "1", "--steps", "4",
            "-b", batch, "--quiet", "--tag", "t",
        )  # fmt: skip
        assert outcome.code == 0, outcome.stderr


def test_the_report_renders_in_chromium(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    executable = chromium_or_skip()
    save_calibration(cpu_calibration())  # the real runs record the cost model's prediction
    record_real_runs(run_cli)
    store_crafted(crafted())
    with Store() as store:
        runs = store.runs()
    assert len(runs) == 8
    out = tmp_path / "report.html"
    outcome = run_cli("report", "--out", str(out))
    assert outcome.code == 0, outcome.stderr

    with opened(executable, out) as (page, seen):
        images = page.eval_on_selector_all(
            "img", "imgs => imgs.map(i => [i.complete, i.naturalWidth, i.naturalHeight])"
        )
        rows = page.eval_on_selector_all(
            "#runs tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.innerText.trim()))"
        )
        front = page.eval_on_selector_all("#pareto tbody tr", "rows => rows.length")
        oracle = page.eval_on_selector_all(
            "#oracle tbody tr", "rows => rows.map(r => r.cells[1].innerText.trim())"
        )
        env_rows = page.eval_on_selector_all("[id^=env-] tr", "rows => rows.length")
        injected = page.evaluate(
            "document.querySelectorAll('script, img[src=x], svg[onload], [onerror], [onload]').length"
        )
        headings = page.eval_on_selector_all("h2", "hs => hs.map(h => h.innerText)")
        drift = page.eval_on_selector_all(
            "#estimate tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.innerText.trim()))"
        )
        drift_plots = page.eval_on_selector_all("#estimate img", "imgs => imgs.map(i => i.naturalWidth)")
        shot = tmp_path / "report.png"
        page.screenshot(path=str(shot), full_page=True)

    # plots: Pareto, the oracle view, throughput, samples/J, Rate/GlobalRate for each run, and the
    # predicted ÷ measured figure of the one machine whose runs recorded a prediction; all decoded
    assert len(images) == 5 + len(runs)
    assert drift_plots == [1200]
    # the estimate table: every run, the two real ones with a recorded ratio, oldest first
    assert len(drift) == len(runs)
    predicted = [row for row in drift if row[5] != "—"]
    assert len(predicted) == 2
    assert all(float(row[5]) > 0 and row[6].startswith("recorded") for row in predicted)
    assert "Estimate against measurement" in headings
    assert all(complete and width == 1200 and height == 750 for complete, width, height in images), images
    # the runs table: one row per run, newest first, no empty cell
    assert [row[0] for row in rows] == [r.run_id for r in runs]
    assert all(len(row) == 14 and all(row) for row in rows), rows
    assert front >= 1 and env_rows >= 8
    assert oracle == ["bf16", "fp32"]  # the best configuration per precision
    assert "Measurement warnings" in headings and "Pareto frontier" in headings
    assert "Best configuration per option" in headings
    # nothing fetched, nothing run, nothing injected
    assert seen.fetched == []
    assert seen.console_errors == [] and seen.page_errors == []
    assert seen.dialogs == []
    assert injected == 0
    # the screenshot: a real page, taller than the window
    data = shot.read_bytes()
    width, height = struct.unpack(">II", data[16:24])
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and width == 1280 and height > 3000
    assert len(data) > 100_000


def test_the_survey_card_renders_in_chromium(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    """A real survey's card (flowrate survey --html) opens with every figure's row, nothing
    fetched, nothing run."""
    executable = chromium_or_skip()
    card = tmp_path / "card.html"
    tiny = ("--quick", "--seconds", "0.05", "--shapes", "64x64x64", "--threads", "1", "--no-model")
    outcome = run_cli("survey", *tiny, "--precision", "fp32", "--html", str(card), "--json", "--quiet")
    assert outcome.code == 0, outcome.stderr
    figures = outcome.json()["survey"]["figures"]
    with opened(executable, card) as (page, seen):
        rows = page.eval_on_selector_all(
            "#figures tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.innerText.trim()))"
        )
        headings = page.eval_on_selector_all("h2", "hs => hs.map(h => h.innerText)")
        injected = page.evaluate("document.querySelectorAll('script, [onerror], [onload]').length")
    assert [row[0] for row in rows] == [f["name"] for f in figures]
    assert all(len(row) == 7 and all(row) for row in rows), rows
    assert headings == ["Figures", "Environment"]
    assert seen.fetched == [] and seen.console_errors == seen.page_errors == [] and injected == 0


def test_report_runs_accepts_stored_runs_and_results_alike() -> None:
    result = make_result(run_id="feedfacecafe")
    as_result = render_report([result], title="t")
    as_stored = render_report([StoredRun.from_result(result, ["x"])], title="t")
    for page in (as_result, as_stored):
        assert '<code id="run-feedfacecafe">' in page


def test_surveys_get_a_section_of_their_own_and_stay_out_of_the_runs() -> None:
    run = make_result(run_id="feedfacecafe")
    figures = [
        make_figure("matmul bf16", 791e12, "FLOP/s", datasheet=989e12, band=(0.3, 1.0)),
        make_figure("copy", 0.5e12, "B/s", datasheet=3.35e12, band=(0.3, 1.0)),
    ]
    survey = replace(
        make_result(1.0, run_id="5urvey000001"),
        kind=Kind.SURVEY,
        survey=Survey(device="<i>H100</i>", quick=True, figures=figures),
        config=config_from(Kind.SURVEY, {"problem": "survey"}),
    )
    page = render_report([run, survey], title="t")
    assert '<code id="run-feedfacecafe">' in page and '<code id="run-5urvey000001">' not in page
    assert '<section id="surveys"><h2>Machine surveys</h2>' in page
    assert "<h3>&lt;i&gt;H100&lt;/i&gt;: survey 5urvey000001, " in page
    assert '<table id="survey-5urvey000001">' in page and page.count('<tr class="outside">') == 1
    # the header counts the survey apart from the runs
    assert "<div><dt>runs</dt><dd>1</dd></div><div><dt>surveys</dt><dd>1</dd></div>" in page
    assert "Machine surveys" not in render_report([run], title="t")


def test_the_runs_table_shows_each_runs_precision_census() -> None:
    census = Census(
        requested="bf16",
        effective="bf16",
        formats={
            "bf16": FormatFigures(flops=978, bytes=0, calls=2, flop_share=0.978),
            "fp32": FormatFigures(flops=22, bytes=0, calls=1, flop_share=0.022),
        },
    )
    counted = replace(
        make_result(run_id="c0ffee000001", precision="bf16"), operators=Operators(census=census)
    )
    page = render_report([counted, make_result(run_id="c0ffee000002")], title="t")
    line = "bf16 requested — 97.8% of FLOPs in bf16, 2.2% in fp32; effective: bf16"
    assert page.count(line) == 1
    assert page.count('title="precision census"') == 1  # the run without a census shows none
