"""The streaming client and a whole bench run against a real HTTP server on loopback
(tests/fault_server.py, in a thread) that can answer well, with HTTP errors, or with malformed SSE."""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Iterator

import pytest

import fault_server
from flowrate.errors import ConfigError
from flowrate.results.environment import Environment
from flowrate.results.schema import Result
from flowrate.results.serving_search import search_from
from flowrate.serving import bench, metrics, prompts
from flowrate.serving.result import build_result, serving_section


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """tests/fault_server.py's mode ``demo``: model "tiny"; prompts with "fail" or "garble" fail."""
    fault_server.start()
    yield fault_server.url("demo")


def _prompts(*texts: str) -> list[prompts.Prompt]:
    return [prompts.Prompt(text, None, 3) for text in texts]


def test_a_run_keeps_every_chunk_and_counts_failures_per_request(server: str) -> None:
    target = bench.Target(server, "tiny")
    outcome = bench.run(target, _prompts("hi", "fail me", "garble", "hello"), times=[0.0, 0.01, 0.02, 0.03])
    good, failed, garbled, last = outcome.traces
    assert [c.text for c in good.chunks] == ["one", " two", " three", ""]
    assert good.ok and good.usage_completion_tokens == 3 and good.status == 200
    assert all(good.sent_s <= c.t_s for c in good.chunks) and good.end_s is not None
    assert failed.error == "HTTP 500: boom" and not failed.ok
    assert garbled.error is not None and garbled.error.startswith("malformed SSE data")
    assert last.ok and not outcome.partial
    section = serving_section(outcome.traces, metrics.Slo(ttft_ms=10_000), {"model": "tiny"}, False)
    assert section.errors == {"HTTP 500": 1, "malformed SSE data": 1}
    assert section.figures("vllm").error_rate == 0.5
    result = build_result(outcome.traces, section, Environment())
    again = Result.from_json(result.to_json())  # validates, and the raw traces round-trip
    assert again.serving is not None and again.serving.traces[0].chunks[1].text == " two"
    assert again == result and again.to_json() == result.to_json()
    assert again.summary.timed_samples == 2


def test_a_model_the_server_rejects_is_one_line_before_the_load(server: str) -> None:
    with pytest.raises(
        ConfigError,
        match=r"refused 'nope' at /v1/completions \(or has no such endpoint\): HTTP 404: no model nope",
    ):
        bench.run(bench.Target(server, "nope"), _prompts("hi"), times=[0.0])


def test_nothing_listening_is_one_line_within_the_connect_timeout() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, not listening: the connection is refused
        with pytest.raises(ConfigError, match=f"cannot connect to 127.0.0.1:{port}"):
            bench.check_reachable(bench.Target(f"http://127.0.0.1:{port}", "tiny", connect_timeout_s=2.0))
    with pytest.raises(ConfigError, match="is not an http"):
        bench.check_reachable(bench.Target("ftp://x", "tiny"))


def test_conflicting_load_options_are_one_line_each(run_cli) -> None:  # type: ignore[no-untyped-def]
    base = ("serve-bench", "--url", "http://127.0.0.1:9", "--model", "m", "--no-store")
    cases = [
        (("--scenario", "offline", "--rate", "5"), "offline sends every request at once"),
        (("--scenario", "server"), "server needs --rate and Poisson arrivals"),
        (("--rate", "5", "--concurrency", "2"), "choose one of --rate, --concurrency, --replay"),
        (("--find-max-rate", "--rate", "5"), "needs --slo and a starting --rate"),
        (("--slo", "ttft_ms=-1"), "a limit must be a finite number above 0 ms"),
    ]
    for extra, message in cases:
        outcome = run_cli(*base, *extra)
        assert outcome.code == 2 and message in outcome.stderr and "Traceback" not in outcome.stderr


def test_an_offline_scenario_sends_everything_at_once_and_records_it(server, run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "offline.json"
    outcome = run_cli(
        "serve-bench",
        "--url",
        server,
        "--model",
        "tiny",
        "-n",
        "5",
        "--scenario",
        "offline",
        "--output-len",
        "3",
        "--no-store",
        "--quiet",
        "--out",
        str(out),
        "--plot",
        str(tmp_path / "serve.png"),
    )
    assert outcome.code == 0, outcome.stderr
    assert (tmp_path / "serve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    serving = Result.load(out).serving
    assert serving is not None and serving.scenario == "offline" and serving.rate == "inf"
    assert [t.scheduled_s for t in serving.traces] == [0.0] * 5
    assert serving.figures().output_tokens == 15  # the server's usage, no tokenizer


def test_the_run_fails_only_above_the_error_rate_it_is_allowed(server, run_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = tmp_path / "prompts.jsonl"
    data.write_text('{"prompt": "hi", "output_len": 2}\n{"prompt": "fail me"}\n')
    args = ("serve-bench", "--url", server, "--model", "tiny", "--dataset", str(data), "-n", "4")
    out = tmp_path / "r.json"
    failing = run_cli(*args, "--concurrency", "2", "--no-store", "--quiet", "--out", str(out))
    assert failing.code == 1 and "50.0% of requests failed (HTTP 500 x2)" in failing.stderr
    assert Result.load(out).serving is not None  # recorded all the same
    allowed = run_cli(*args, "--max-error-rate", "0.5", "--no-store", "--quiet")
    assert allowed.code == 0, allowed.stderr


def test_the_figure_adds_the_rate_search_panel_when_there_was_a_search(server: str) -> None:
    from flowrate.analysis.plots_serving import serving_figure

    outcome = bench.run(bench.Target(server, "tiny"), _prompts("hi", "hello"), times=[0.0, 0.0])
    section = serving_section(outcome.traces, None, {"slo": {"ttft_ms": 50.0}}, False)
    assert len(serving_figure(section, "t").axes) == 2
    search = {"max_rate": 2.0, "points": [{"rate": 2.0, "verdict": "pass", "p99": {"ttft_ms": 9.0}}]}
    section = dataclasses.replace(section, search=search_from(search))
    assert len(serving_figure(section, "t").axes) == 3
