"""Multi-turn conversations (--turns, --think-time) against tests/fault_server.py: the exact
messages each turn sends, the traces' conversation and turn, the per-turn figures, a failed turn
ending its conversation, and what multi-turn refuses before anything is sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import fault_server
from flowrate.serving.prompts import own_order

CHAT = ("--model", "m", "--endpoint", "chat", "--input-len", "4", "--output-len", "2", "--no-store")


@pytest.fixture(scope="module", autouse=True)
def server() -> None:
    fault_server.start()


def test_each_turn_sends_the_earlier_turns_prompts_and_answers(run_cli: Any, tmp_path: Path) -> None:
    """Mode turns counts a BOS and a word a token: a 4-token prompt is 3 words, prompt i's words
    in its own order; each answer is "one two" (2 tokens asked)."""
    out, before = tmp_path / "t.json", len(fault_server.server().bodies)
    args = ("--turns", "3", "-n", "2", "--concurrency", "1", "--out", str(out))
    outcome = run_cli("serve-bench", "--url", fault_server.url("turns"), *CHAT, *args)
    assert outcome.code == 0, outcome.stderr
    assert "2 conversations (6 turns)" in outcome.stderr
    user = [{"role": "user", "content": " ".join(own_order(i)[:3])} for i in range(6)]
    answer = {"role": "assistant", "content": "one two"}
    sent = [body["messages"] for body in fault_server.server().bodies[before:]]
    assert sent == [
        [user[0]],
        [user[0], answer, user[1]],
        [user[0], answer, user[1], answer, user[2]],
        [user[3]],
        [user[3], answer, user[4]],
        [user[3], answer, user[4], answer, user[5]],
    ]
    serving = json.loads(out.read_text())["serving"]
    assert [(t["conversation"], t["turn"]) for t in serving["traces"]] == [
        (0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)
    ]  # fmt: skip
    assert serving["requests"] == 6 and serving["conversations"] == 2 and serving["turns"] == "3"
    assert serving["think_time_s"] == 0.0 and serving["prompts_off_length"] == 0
    # the context each turn carries, as the server counts it: BOS + 3, + 2 + 3, + 2 + 3
    assert [(t["turn"], t["requests"], t["prompt_tokens_median"]) for t in serving["per_turn"]] == [
        (0, 2, 4.0),
        (1, 2, 9.0),
        (2, 2, 14.0),
    ]
    assert "turn 3" in outcome.stderr and "14 prompt tokens: TTFT median" in outcome.stderr


def test_a_failed_turn_ends_its_conversation_and_think_time_spaces_the_turns(
    run_cli: Any, tmp_path: Path
) -> None:
    """Mode second-turn-500 refuses every request holding history."""
    out = tmp_path / "f.json"
    args = ("--turns", "3", "-n", "2", "--rate", "inf", "--think-time", "0.05", "--out", str(out))
    outcome = run_cli("serve-bench", "--url", fault_server.url("second-turn-500"), *CHAT, *args)
    assert outcome.code == 1 and "50.0% of requests failed" in outcome.stderr, outcome.stderr
    traces = json.loads(out.read_text())["serving"]["traces"]
    assert [(t["conversation"], t["turn"], t["status"]) for t in traces] == [
        (0, 0, 200), (0, 1, 500), (1, 0, 200), (1, 1, 500)
    ]  # fmt: skip
    for first, second in ((traces[0], traces[1]), (traces[2], traces[3])):
        assert second["sent_s"] >= first["end_s"] + 0.05  # sent after the answer and the pause


@pytest.mark.parametrize(
    ("args", "flag", "says"),
    [
        (("--turns", "2", "--endpoint", "completions"), "--turns", "need --endpoint chat"),
        (("--think-time", "1"), "--think-time", "only with --turns"),
        (("--turns", "2", "--think-time", "nan"), "--think-time", "not a finite"),
        (("--turns", "0"), "--turns", "lengths 1 to"),
        (("--turns", "2000"), "--turns", "at most 1000 a conversation"),
        (("--turns", "2", "--max-model-len", "10"), "--turns", "up to 12 tokens by its last turn"),
    ],
)
def test_what_multi_turn_cannot_carry_is_refused_before_anything_is_sent(
    run_cli: Any, args: tuple[str, ...], flag: str, says: str
) -> None:
    posts = fault_server.server().posts
    outcome = run_cli("serve-bench", "--url", fault_server.url("ok"), *CHAT, *args)
    assert outcome.code == 2 and flag in outcome.stderr and says in outcome.stderr, outcome.stderr
    assert "Traceback" not in outcome.stderr and len(outcome.stderr.strip().splitlines()) == 1
    assert fault_server.server().posts == posts
