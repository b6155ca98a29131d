"""benchmarks/serve_peers.py's pure parts, on real outputs recorded against `transformers serve`
(tests/fixtures/peers/: AIPerf 0.13.0's profile_export_aiperf.json, guidellm 0.8.1's
benchmarks.json cut to its metadata and the metrics read, inference-perf 0.7.0's
summary_lifecycle_metrics.json, and a `flowrate serve-bench --out` record of 6 requests)."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import median

import pytest

from benchmark_scripts import load_benchmark

FIXTURES = Path(__file__).parents[1] / "fixtures" / "peers"
figures = load_benchmark("peer_figures")
runs = load_benchmark("peer_runs")


def _fixture(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((FIXTURES / name).read_text())


def test_aiperf_export_is_read_as_its_averages_and_medians_in_ms() -> None:
    read = figures.read_aiperf(_fixture("aiperf_profile_export_aiperf.json"))
    assert read.request_rate == pytest.approx(0.7110297552339901)
    assert read.output_tokens_per_s == pytest.approx(11.376476083743842)
    assert read.ttft_ms == pytest.approx(1816.9569875)  # p50, not the avg 1731.3
    assert read.tpot_ms == pytest.approx(54.971456933333336)  # its inter_token_latency p50
    assert read.e2e_ms == pytest.approx(2382.765619)


def test_guidellm_report_is_read_with_its_seconds_turned_to_ms_and_its_itl_as_tpot() -> None:
    read = figures.read_guidellm(_fixture("guidellm_benchmarks.json"))
    assert read.request_rate == pytest.approx(0.981379781422896)  # 6 in its 6.114 s
    assert read.output_tokens_per_s == pytest.approx(15.702076502766335)
    assert read.ttft_ms == pytest.approx(275.3922939300537)
    assert read.tpot_ms == pytest.approx(27.680301666259766)  # not time_per_output_token_ms
    assert read.e2e_ms == pytest.approx(662.5378131866455)  # request_latency is in seconds


def test_inference_perf_summary_is_read_with_its_seconds_turned_to_ms() -> None:
    read = figures.read_inference_perf(_fixture("inference_perf_summary_lifecycle_metrics.json"))
    assert read.request_rate == pytest.approx(0.7304335524824664)
    assert read.output_tokens_per_s == pytest.approx(11.686936839719463)
    assert read.ttft_ms == pytest.approx(1095.9232044988312)
    assert read.tpot_ms == pytest.approx(66.0063676333569)
    assert read.e2e_ms == pytest.approx(2222.4676464993536)


def test_flowrate_record_is_read_under_its_own_definitions() -> None:
    record = _fixture("flowrate_serve_bench.json")
    read = figures.read_flowrate(record)
    m = record["serving"]["metrics"]["flowrate"]
    assert (read.request_rate, read.ttft_ms, read.e2e_ms) == (
        m["request_throughput"],
        m["ttft_ms"]["median"],
        m["e2e_ms"]["median"],
    )


def test_flowrates_traces_reread_as_aiperf_counts_them() -> None:
    """By hand from the raw trace: TTFT to the first chunk with text, E2E to the last chunk,
    TPOT (E2E - TTFT) / (n - 1) with the server's 16 tokens; the rate over AIPerf's span, from one
    gap (1 s at --rate 1) before the first send to the last chunk."""
    record = _fixture("flowrate_serve_bench.json")
    traces = record["serving"]["traces"]
    ttft = [next(c["t_s"] for c in t["chunks"] if c["text"]) - t["sent_s"] for t in traces]
    e2e = [t["chunks"][-1]["t_s"] - t["sent_s"] for t in traces]
    span = max(t["chunks"][-1]["t_s"] for t in traces) - min(t["sent_s"] for t in traces) + 1.0
    assert {t["output_tokens"] for t in traces} == {16} and record["serving"]["rate"] == 1.0
    read = figures.reread(record, "aiperf")
    assert read.ttft_ms == pytest.approx(median(ttft) * 1000)
    assert read.e2e_ms == pytest.approx(median(e2e) * 1000)
    assert read.tpot_ms == pytest.approx(median((b - a) / 15 for a, b in zip(ttft, e2e, strict=True)) * 1000)
    assert read.request_rate == pytest.approx(6 / span)
    assert read.output_tokens_per_s == pytest.approx(96 / span)


def _f(rate: float, ttft: float) -> object:
    return figures.Figures(rate, rate * 16, ttft, 40.0, ttft + 600.0)


def test_a_figure_within_10_percent_agrees_and_names_no_definition() -> None:
    rows = figures.verdicts("aiperf", [_f(1.0, 100.0)] * 3, [_f(0.95, 105.0)] * 3, [_f(1.0, 100.0)] * 3)
    rate = rows[0]
    assert (rate.figure, rate.ratio, rate.within_10, rate.definition) == (
        "request_rate",
        pytest.approx(1 / 0.95),
        True,
        None,
    )
    assert all(r.holds for r in rows) and [r.figure for r in rows] == list(figures.FIGURES)


def test_a_figure_off_by_more_than_10_percent_is_reread_under_the_peers_definition() -> None:
    ours = [_f(1.0, 100.0), _f(1.0, 110.0), _f(1.0, 90.0)]  # median TTFT 100
    theirs = [_f(1.0, 150.0), _f(1.0, 140.0), _f(1.0, 160.0)]  # median 150
    close = [_f(1.0, 147.0), _f(1.0, 200.0), _f(1.0, 100.0)]  # median 147: 0.98 of theirs
    ttft = figures.verdicts("guidellm", ours, theirs, close)[2]
    assert (ttft.figure, ttft.ratio, ttft.within_10) == ("ttft_ms", pytest.approx(100 / 150), False)
    assert ttft.definition == figures.DEFINITIONS["guidellm"]["ttft_ms"]
    assert (ttft.reread, ttft.reread_ratio, ttft.within_3, ttft.holds) == (
        147.0,
        pytest.approx(0.98),
        True,
        True,
    )
    far = figures.verdicts("guidellm", ours, theirs, [_f(1.0, 142.0)] * 3)[2]
    assert (far.reread_ratio, far.within_3, far.holds) == (pytest.approx(142 / 150), False, False)
    assert "differs: guidellm: the first chunk with text" in figures.table([far])


def test_every_tool_is_given_the_same_load() -> None:
    load = runs.Load("http://127.0.0.1:1", "/m", 0.5, 20, 32, 16)
    folder, bins = Path("/w"), Path("/b")
    flowrate = runs.flowrate_command(load, folder)
    assert flowrate[flowrate.index("--arrivals") + 1] == "constant"
    assert [flowrate[flowrate.index(k) + 1] for k in ("--rate", "-n", "--input-len", "--output-len")] == [
        "0.5", "20", "32", "16",
    ]  # fmt: skip
    aiperf = runs.aiperf_command(load, folder, bins)
    keys = ("--request-rate", "--arrival-pattern", "--request-count")
    assert [aiperf[aiperf.index(k) + 1] for k in keys] == ["0.5", "constant", "20"]
    assert [aiperf[aiperf.index(k) + 1] for k in ("--isl", "--osl", "--tokenizer")] == ["32", "16", "/m"]
    guidellm = " ".join(runs.guidellm_command(load, folder, bins))
    for part in ("kind=constant,rate=0.5", "kind=max_requests,count=20", "prompt_tokens=32,output_tokens=16"):
        assert part in guidellm
    config = runs.inference_perf_config(load, folder)
    assert config["load"]["type"] == "constant"
    assert config["load"]["stages"] == [{"rate": 0.5, "duration": 40}]  # 20 requests
    assert config["data"]["output_distribution"]["mean"] == 16 == config["data"]["output_distribution"]["max"]


def test_a_peer_without_its_interpreter_is_skipped_with_the_reason_and_nothing_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = load_benchmark("serve_peers")
    monkeypatch.setattr(script, "CACHE", tmp_path)
    peer = script.Peer("inference-perf", "0.7.0", "")
    reason = script.install(peer)
    assert reason == "inference-perf 0.7.0 needs an interpreter that is not on PATH (python3.12)"
    assert not any(tmp_path.iterdir())
