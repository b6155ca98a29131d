"""Serve-bench runs in `compare` (TTFT/TPOT/E2E p99, lower is better), `plot serving` and the
report's Serving section, from stored Results built of hand-made traces with known latencies."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from factories import make_result
from flowrate.analysis.report import render_report
from flowrate.results.compare import compare
from flowrate.results.schema import Result
from flowrate.results.serving import Chunk, RequestTrace, serving_from
from flowrate.results.store import Store
from flowrate.serving.metrics import Slo
from flowrate.serving.result import build_result, serving_section

PNG = b"\x89PNG\r\n\x1a\n"


def serve_result(ttft_s: float, run_id: str, search: bool = False) -> Result:
    """Ten requests whose first token comes ``ttft_s`` after the send, then 4 tokens 20 ms apart."""
    traces = []
    for i in range(10):
        trace = RequestTrace(i, i * 0.5, sent_s=i * 0.5, max_tokens=5, status=200)
        times = [i * 0.5 + ttft_s + k * 0.02 for k in range(5)]
        trace.chunks = [Chunk(t, "x", 1) for t in times]
        trace.end_s = times[-1]
        traces.append(trace)
    section = serving_section(traces, Slo(ttft_ms=150.0), {"model": "tiny"}, False)
    if search:
        points = [
            {"rate": r, "verdict": v, "p99": {"ttft_ms": p}}
            for r, v, p in ((1, "pass", 90), (2, "fail", 200))
        ]
        section = replace(section, slo={"ttft_ms": 150.0}, search={"points": points, "max_rate": 1.0})
    environment = make_result().environment
    result = build_result(traces, section, environment)
    return replace(result, run_id=run_id)


def test_compare_reads_ttft_p99_from_stored_runs_lower_is_better(results_store: Path) -> None:
    with Store(results_store) as store:
        for i, ttft in enumerate((0.100, 0.102, 0.098)):
            store.add(serve_result(ttft, f"aaaa{i:04d}"), ["slow"])
        for i, ttft in enumerate((0.050, 0.051, 0.049)):
            store.add(serve_result(ttft, f"bbbb{i:04d}"), ["fast"])
        a = [r.result for r in store.resolve("slow")]
        b = [r.result for r in store.resolve("fast")]
    ttft = compare(a, b).metric("ttft_p99_ms")
    assert ttft is not None and not ttft.higher_is_better
    assert ttft.mean_a is not None and abs(ttft.mean_a - 100.0) < 1e-6
    assert ttft.ratio is not None and abs(ttft.ratio - 0.5) < 1e-6
    assert ttft.verdict == "better"
    tpot = compare(a, b).metric("tpot_p99_ms")  # 20 ms a token on both sides
    assert tpot is not None and tpot.mean_a is not None and abs(tpot.mean_a - 20.0) < 1e-6
    reverse = compare(b, a).metric("ttft_p99_ms")
    assert reverse is not None and reverse.verdict == "worse"


def test_serving_metrics_are_absent_unless_both_sides_are_serving_runs() -> None:
    served, plain = serve_result(0.1, "aaaa0000"), make_result(run_id="cccc0000")
    names = {m.metric for m in compare([plain], [served]).metrics}
    assert not names & {"ttft_p99_ms", "tpot_p99_ms", "e2e_p99_ms"}
    assert compare([plain], [plain]).metric("e2e_p99_ms") is None


def test_cli_compare_json_has_the_ttft_ratio(run_cli: Any, results_store: Path) -> None:
    with Store(results_store) as store:
        store.add(serve_result(0.100, "aaaa0000"))
        store.add(serve_result(0.150, "bbbb0000"))
    outcome = run_cli("compare", "aaaa0000", "bbbb0000", "--no-history", "--format", "json")
    assert outcome.code == 0, outcome.stderr
    metrics = {m["metric"]: m for m in json.loads(outcome.stdout)["metrics"]}
    assert abs(metrics["ttft_p99_ms"]["ratio"] - 1.5) < 1e-6
    assert metrics["ttft_p99_ms"]["higher_is_better"] is False


def test_plot_serving_writes_a_png_and_refuses_a_plain_run(
    run_cli: Any, results_store: Path, tmp_path: Path
) -> None:
    with Store(results_store) as store:
        store.add(serve_result(0.1, "aaaa0000", search=True))
        store.add(make_result(run_id="cccc0000"))
    out = tmp_path / "s.png"
    outcome = run_cli("plot", "serving", "aaaa0000", "--out", str(out))
    assert outcome.code == 0, outcome.stderr
    assert out.read_bytes().startswith(PNG)
    refused = run_cli("plot", "serving", "cccc0000", "--out", str(tmp_path / "c.png"))
    assert refused.code == 2
    assert "not a serve-bench run" in refused.stderr and "Traceback" not in refused.stderr


def test_the_report_has_a_serving_section_with_a_figure_per_serving_run() -> None:
    page = render_report([serve_result(0.1, "aaaa0000", search=True), make_result(run_id="cccc0000")])
    body = page.split('<section id="serving">')[1].split("</section>")[0]
    assert body.count('<img class="plot"') == 1 and "aaaa0000" in body
    plain = render_report([make_result(run_id="cccc0000")])
    assert "No serve-bench runs" in plain.split('<section id="serving">')[1]


def test_a_malformed_serving_section_is_a_note_not_a_crash() -> None:
    broken = replace(serve_result(0.1, "aaaa0000"), serving=serving_from({"metrics": "x", "traces": "y"}))
    assert compare([broken], [broken]).metric("ttft_p99_ms") is None
    body = render_report([broken]).split('<section id="serving">')[1].split("</section>")[0]
    assert "serving section is malformed" in body and '<img class="plot"' not in body
