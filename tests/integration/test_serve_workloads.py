"""serve-bench's workloads against tests/fault_server.py: lengths drawn from a distribution (each
request's in its trace, the spec in the section), warm-up requests kept out of every figure, and
one line naming the flag, with nothing sent, for an option it cannot use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fault_server
from flowrate.results.schema import Result


@pytest.fixture(scope="module", autouse=True)
def server() -> None:
    fault_server.start()


def _bench(run_cli: Any, out: Path, *extra: str, mode: str = "ok") -> tuple[Any, dict[str, Any]]:
    argv = ("serve-bench", "--url", fault_server.url(mode), "--model", "m", "--no-store", "--out", str(out))
    outcome = run_cli(*argv, *extra)
    assert outcome.code == 0, outcome.stderr
    return outcome, json.loads(out.read_text())["serving"]


def test_lengths_drawn_from_distributions_are_the_seeds_and_each_trace_holds_its_own(
    run_cli: Any, tmp_path: Path
) -> None:
    spec = ("--input-len", "normal:20,4", "--output-len", "uniform:2,9", "--seed", "5", "-n", "6")
    _, serving = _bench(run_cli, tmp_path / "a.json", "--rate", "inf", *spec)
    rng = np.random.default_rng(5)  # inputs first, then outputs, from the one seeded generator
    inputs = [int(x) for x in np.rint(rng.normal(20, 4, size=6))]
    outputs = [int(x) for x in rng.integers(2, 10, size=6)]
    assert [t["input_len"] for t in serving["traces"]] == inputs
    assert [t["max_tokens"] for t in serving["traces"]] == outputs
    # the mode counts a BOS and a word a token: calibrated, each prompt is its drawn length
    assert [t["usage_prompt_tokens"] for t in serving["traces"]] == inputs
    assert (serving["input_len"], serving["output_len"]) == ("normal:20,4", "2:9")
    _, again = _bench(run_cli, tmp_path / "b.json", "--rate", "inf", *spec)
    assert [t["input_len"] for t in again["traces"]] == inputs


def test_lengths_from_a_column_of_a_csv(run_cli: Any, tmp_path: Path) -> None:
    table = tmp_path / "lengths.csv"
    table.write_text("prompt_len\n5\n7\n")
    _, serving = _bench(
        run_cli, tmp_path / "c.json", "--rate", "inf", "-n", "8", "--input-len", f"file:{table}#prompt_len"
    )
    picks = np.random.default_rng(0).choice(np.array([5, 7]), size=8)
    assert [t["input_len"] for t in serving["traces"]] == [int(x) for x in picks]
    assert serving["input_len"] == f"file:{table}#prompt_len"


def test_warmup_requests_are_sent_first_and_kept_out_of_every_figure(run_cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "w.json"
    _, serving = _bench(run_cli, out, "--concurrency", "2", "-n", "4", "--warmup", "3", "--input-len", "8")
    traces = serving["traces"]
    assert [t["warmup"] for t in traces] == [True] * 3 + [False] * 4
    warm, measured = traces[:3], traces[3:]
    assert all(t["end_s"] < 0 and t["error"] is None for t in warm)  # before the load's clock
    assert all(t["sent_s"] >= 0 for t in measured)
    assert serving["warmup"] == 3 and serving["requests"] == 4
    assert serving["metrics"]["flowrate"]["completed"] == 4
    assert serving["send_lateness_ms"]["n"] == 4
    result = Result.load(out)
    assert result.summary.timed_samples == 4
    # the measured requests' prompts do not depend on --warmup
    _, plain = _bench(run_cli, tmp_path / "p.json", "--concurrency", "2", "-n", "4", "--input-len", "4:9")
    _, warmed = _bench(
        run_cli, tmp_path / "q.json", "--concurrency", "2", "-n", "4", "--input-len", "4:9", "--warmup", "2"
    )
    assert [t["input_len"] for t in plain["traces"]] == [t["input_len"] for t in warmed["traces"][2:]]


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (("--input-len", "uniform:5,2"), "--input-len"),
        (("--input-len", "normal:abc,1"), "--input-len"),
        (("--output-len", "normal:nan,1"), "--output-len"),
        (("--output-len", "lognormal:-1,1"), "--output-len"),
        (("--input-len", "file:missing-lengths.txt"), "--input-len"),
        (("--warmup", "-1"), "--warmup"),
        (("--warmup", "2", "--find-max-rate", "--slo", "ttft_ms=100"), "--warmup"),
    ],
)
def test_an_option_it_cannot_use_is_one_line_and_nothing_is_sent(
    run_cli: Any, tmp_path: Path, extra: tuple[str, ...], flag: str
) -> None:
    before = fault_server.server().posts
    argv = ("serve-bench", "--url", fault_server.url("ok"), "--model", "m", "--rate", "2", "--no-store")
    outcome = run_cli(*argv, "--out", str(tmp_path / "x.json"), *extra)
    assert outcome.code == 2, outcome.stderr
    assert "Traceback" not in outcome.stderr and flag in outcome.stderr
    assert not (tmp_path / "x.json").exists()
    assert fault_server.server().posts == before


def test_shared_prefixes_start_every_prompt_of_a_group_and_count_in_its_length(
    run_cli: Any, tmp_path: Path
) -> None:
    """Without a tokenizer the prefix is sized by the server's counts (a BOS and a word a token
    here): each prompt is its prefix's 6 tokens and its own 5."""
    extra = ("--shared-prefix-len", "6", "--prefix-groups", "2", "-n", "6", "--input-len", "5")
    _, serving = _bench(run_cli, tmp_path / "s.json", "--rate", "inf", *extra)
    traces = serving["traces"]
    assert [t["prefix_group"] for t in traces] == [0, 1, 0, 1, 0, 1]
    assert [t["input_len"] for t in traces] == [11] * 6
    assert [t["usage_prompt_tokens"] for t in traces] == [11] * 6
    assert (serving["shared_prefix_len"], serving["prefix_groups"]) == (6, 2)
    assert serving["prompts_off_length"] == 0


def test_shared_prefix_with_a_tokenizer_is_token_exact(tmp_path: Path) -> None:
    from flowrate.serving import prompts
    from serving_factories import word_tokenizer

    local = word_tokenizer(tmp_path, vocab_size=60, context=400)
    prefix = prompts.SharedPrefix(tokens=7, groups=3, seed=1)
    made = prompts.synthetic(6, (4, 9), (3, 3), local, seed=2, prefix=prefix)
    heads = [" ".join(p.text.split()[:7]) for p in made]
    assert heads[0] == heads[3] and heads[1] == heads[4] and len(set(heads[:3])) == 3
    for p in made:
        assert p.tokens == len(local.encode(p.text)) == p.asked and 11 <= p.asked <= 16
    # the words the server's counts call for keep each group's prefix the same
    cost = {w: 2 if w in ("quick", "brown") else 1 for w in prompts.WORDS}
    alone = [1 + cost[w] for w in prompts.WORDS]
    costs = prompts.WordCosts.from_counts([*alone, *(1 + 2 * cost[w] for w in prompts.WORDS)])
    assert isinstance(costs, prompts.WordCosts)
    sized = prompts.calibrated(prompts.synthetic(4, (6, 6), (3, 3), None, prefix=prefix), costs, prefix)
    words = [p.text.split() for p in sized]
    head, count = costs.words_for(7, 0, prefix.order(0))
    assert words[0][: len(head)] == words[3][: len(head)] == head and count == 7
    assert words[1][: len(head)] != head


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (("--prefix-groups", "2"), "--prefix-groups"),
        (("--shared-prefix-len", "-3"), "--shared-prefix-len"),
        (("--shared-prefix-len", "4", "--replay", "trace.jsonl"), "--shared-prefix-len"),
    ],
)
def test_a_prefix_option_it_cannot_use_is_one_line_and_nothing_is_sent(
    run_cli: Any, tmp_path: Path, extra: tuple[str, ...], flag: str
) -> None:
    (tmp_path / "trace.jsonl").write_text('{"time": 0, "prompt_len": 3, "output_len": 2}\n')
    before = fault_server.server().posts
    argv = ("serve-bench", "--url", fault_server.url("ok"), "--model", "m", "--no-store")
    extra = tuple(str(tmp_path / e) if e == "trace.jsonl" else e for e in extra)
    outcome = run_cli(*argv, *extra)
    assert outcome.code == 2 and "Traceback" not in outcome.stderr and flag in outcome.stderr
    assert fault_server.server().posts == before


def test_server_metrics_are_the_servers_own_figures_over_the_load(run_cli: Any, tmp_path: Path) -> None:
    """The fault server's page counts its answered requests (not the probe, not --warmup's, which
    come before the first scrape): 5 requests each with a TTFT of 0.25 s and a queue of 0.5 s."""
    extra = ("--concurrency", "2", "-n", "5", "--warmup", "2", "--input-len", "4", "--server-metrics")
    outcome, serving = _bench(run_cli, tmp_path / "m.json", *extra, mode="metrics")
    scraped = serving["server_metrics"]
    assert scraped["available"] is True
    families = scraped["families"]
    ttft = families["vllm:time_to_first_token_seconds"]
    assert (ttft["type"], ttft["count"], ttft["sum"], ttft["mean"]) == ("histogram", 5, 1.25, 0.25)
    assert families["vllm:request_queue_time_seconds"]["mean"] == 0.5
    before = fault_server.server().answered - 5
    assert families["vllm:kv_cache_usage_perc"] == {
        "type": "gauge",
        "before": before / 100,
        "after": (before + 5) / 100,
    }
    assert families["vllm:prefix_cache_hits"] == {"type": "counter", "increase": 80}
    assert "vllm:num_requests_running" not in families  # not a queue, TTFT or cache family
    assert "warning" not in outcome.stderr


@pytest.mark.parametrize(("mode", "says"), [("ok", "answered HTTP 404"), ("garbled", "not Prometheus text")])
def test_a_server_without_metrics_is_one_warning_and_the_run_goes_on(
    run_cli: Any, tmp_path: Path, mode: str, says: str
) -> None:
    extra = ("--rate", "inf", "-n", "2", "--input-len", "4", "--server-metrics")
    outcome, serving = _bench(run_cli, tmp_path / "n.json", *extra, mode=mode)
    assert serving["server_metrics"]["available"] is False and says in serving["server_metrics"]["reason"]
    assert serving["metrics"]["flowrate"]["completed"] == 2
    assert [line for line in outcome.stderr.splitlines() if "--server-metrics" in line] == [
        line for line in outcome.stderr.splitlines() if says in line
    ]
    assert len([line for line in outcome.stderr.splitlines() if says in line]) == 1
