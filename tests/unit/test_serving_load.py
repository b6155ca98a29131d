"""Load plans, the open-loop sender, prompts and option parsing (the rate search: test_serving_search)."""

from __future__ import annotations

import asyncio
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from flowrate.errors import ConfigError
from flowrate.serving import load, prompts
from flowrate.serving.plan import parse_slo
from serving_factories import word_tokenizer


def test_gamma_gaps_have_the_rate_and_the_burstiness() -> None:
    for burstiness, cv in ((1.0, 1.0), (4.0, 0.5), (0.25, 2.0)):
        times = load.arrival_times(20000, rate=50.0, burstiness=burstiness, seed=1)
        gaps = np.diff(times)
        assert times[0] == 0.0 and np.all(gaps >= 0)
        assert gaps.mean() == pytest.approx(1 / 50, rel=0.05)
        assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.05)  # gamma: CV = 1/sqrt(shape)
    assert load.arrival_times(3, math.inf) == [0.0, 0.0, 0.0]


def test_constant_arrivals_are_exactly_one_over_the_rate_apart() -> None:
    assert load.arrival_times(5, rate=4.0, seed=7, constant=True) == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_ramp_up_follows_the_inverse_cumulative_rate() -> None:
    # gaps of shape 1e9 are 1 apart in "expected arrivals": u = 0, 1, 2, ...
    times = load.arrival_times(30, rate=2.0, burstiness=1e9, ramp_up_s=10.0)
    for u, t in enumerate(times):
        expected = math.sqrt(2 * 10 * u / 2) if u < 10 else u / 2 + 5
        assert t == pytest.approx(expected, rel=1e-3, abs=1e-6)


def test_replay_sorts_and_shifts_to_zero_and_refuses_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    rows = [{"time": 5.5, "prompt_len": 3, "output_len": 4}, {"time": 2.0, "prompt_len": 1, "output_len": 2}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    plan = load.read_replay(path, 100, 1000)
    assert [(p.at_s, p.prompt_len, p.output_len) for p in plan] == [(0.0, 1, 2), (3.5, 3, 4)]
    path.write_text('{"time": 1}\n')
    with pytest.raises(ConfigError, match="line 1: expected a JSON object"):
        load.read_replay(path, 100, 1000)


def test_open_loop_sends_on_schedule_whatever_the_responses_do() -> None:
    started: list[int] = []
    finished: list[int] = []

    async def slow(index: int) -> None:  # a server that takes far longer than the gaps
        started.append(index)
        await asyncio.sleep(0.3)
        finished.append(index)

    async def main() -> None:
        await load.open_loop([0.0, 0.01, 0.02, 0.03], slow, time.perf_counter(), deadline_s=5.0)

    asyncio.run(main())
    assert started == [0, 1, 2, 3] and sorted(finished) == [0, 1, 2, 3]
    # closed loop at concurrency 1 waits for each answer instead
    order: list[str] = []

    async def logged(index: int) -> None:
        order.append(f"start{index}")
        await asyncio.sleep(0.01)
        order.append(f"end{index}")

    asyncio.run(load.closed_loop(2, 1, logged, time.perf_counter(), deadline_s=5.0))
    assert order == ["start0", "end0", "start1", "end1"]


def test_open_loop_cancels_what_is_unfinished_at_the_deadline() -> None:
    cancelled: list[int] = []

    async def hang(index: int) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(index)
            raise

    asyncio.run(load.open_loop([0.0, 0.0], hang, time.perf_counter(), deadline_s=0.05))
    assert sorted(cancelled) == [0, 1]


def test_synthetic_prompts_are_token_exact_with_a_tokenizer(tmp_path: Path) -> None:
    local = word_tokenizer(tmp_path, vocab_size=60, context=40)
    made = prompts.synthetic(6, (5, 12), (3, 3), local, seed=2)
    for p in made:
        assert p.tokens == len(local.encode(p.text)) == p.asked and 5 <= p.tokens <= 12 and p.max_tokens == 3
    assert len({p.text for p in made}) == 6
    with pytest.raises(ConfigError, match="more than the model's context of 40"):
        prompts.check_context(prompts.synthetic(1, (38, 38), (3, 3), local), local.context)


def _heads(texts: list[str], encode: Any, skip: int = 0) -> set[tuple[int, ...]]:
    return {tuple(encode(text)[skip : skip + 8]) for text in texts}


def test_no_two_synthetic_prompts_share_their_first_8_tokens_unless_a_shared_prefix_asks(
    tmp_path: Path,
) -> None:
    """Prompts i and i + 18 once had the same text (WORDS cycled from word i): now each has its
    own order of the words, so a prefix-caching server has nothing to hit across 100 requests."""
    local = word_tokenizer(tmp_path, vocab_size=60)
    made = prompts.synthetic(100, (12, 12), (3, 3), local)
    assert all(p.tokens == 12 for p in made)
    assert len(_heads([p.text for p in made], local.encode)) == 100
    cost = {w: 1 for w in prompts.WORDS}
    costs = prompts.WordCosts.from_counts([*(1 + cost[w] for w in prompts.WORDS), *(1 + 2 for _ in cost)])
    assert isinstance(costs, prompts.WordCosts)
    sized = prompts.calibrated(prompts.synthetic(100, (12, 12), (3, 3), None), costs)
    assert len(_heads([p.text for p in sized], str.split)) == 100
    prefix = prompts.SharedPrefix(8, 1)
    shared = prompts.synthetic(100, (12, 12), (3, 3), local, prefix=prefix)
    assert len(_heads([p.text for p in shared], local.encode)) == 1  # the prefix, as asked
    assert len(_heads([p.text for p in shared], local.encode, skip=8)) == 100  # then each its own


def test_word_costs_from_the_servers_counts_size_each_prompt() -> None:
    """A server adding a BOS whose words cost 1, except "quick" and "brown" (2 each)."""
    cost = {w: 2 if w in ("quick", "brown") else 1 for w in prompts.WORDS}
    alone = [1 + cost[w] for w in prompts.WORDS]
    doubled = [1 + 2 * cost[w] for w in prompts.WORDS]
    costs = prompts.WordCosts.from_counts([*alone, *doubled])
    assert isinstance(costs, prompts.WordCosts) and costs.after == cost and costs.first["the"] == 2
    # from "the" (2 with the BOS): quick 4, brown 6, fox 7
    assert costs.words_for(7, 0) == (["the", "quick", "brown", "fox"], 7)
    # from "the" to 5: quick 4, brown would pass 5 and is skipped, fox 5
    assert costs.words_for(5, 0) == (["the", "quick", "fox"], 5)
    assert costs.words_for(1, 1) == (["quick"], 3)  # one word at least
    made = prompts.synthetic(2, (5, 5), (3, 3), None)
    # prompt 1's own order: quick (3 with the BOS), the 4, brown would pass 5, fox 5
    assert [p.text for p in prompts.calibrated(made, costs)] == ["the quick fox", "quick the fox"]
    assert prompts.WordCosts.from_counts([*alone[:-1], None, *doubled]) == (
        "1 of 36 probes got no usage.prompt_tokens"
    )
    assert prompts.WordCosts.from_counts([*alone, *alone]) == "the server counted a word as no tokens"


def test_options_parse_or_say_what_is_wrong() -> None:
    assert parse_slo("ttft_ms=500, tpot_ms=50") == {"ttft_ms": 500.0, "tpot_ms": 50.0}
    with pytest.raises(ConfigError, match="KEY one of ttft_ms"):
        parse_slo("ttft=5")


def test_a_serving_runs_device_is_the_server_and_the_client_is_kept_apart() -> None:
    from flowrate.results.serving import Serving
    from flowrate.serving.plan import server_environment

    client = {"device": {"type": "cpu", "name": "AMD EPYC"}, "hostname": "h"}
    named = server_environment(client, Serving(url="http://s:8000", server_device="1x H100"))
    assert named["device"] == {"type": "remote", "name": "1x H100"}
    assert named["client_device"] == {"type": "cpu", "name": "AMD EPYC"} and named["hostname"] == "h"
    unnamed = server_environment(client, Serving(url="http://s:8000"))
    assert unnamed["device"]["name"] == "server at http://s:8000"
