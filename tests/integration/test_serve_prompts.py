"""serve-bench's prompt lengths without a tokenizer, against tests/fault_server.py: the probes
read the server's usage.prompt_tokens and size each prompt; what cannot be sized is warned of."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import fault_server
from flowrate.serving.prompts import WORDS


@pytest.fixture(scope="module", autouse=True)
def server() -> None:
    fault_server.start()


def _bench(run_cli: Any, out: Path, mode: str, *extra: str) -> tuple[Any, dict[str, Any]]:
    argv = ("serve-bench", "--url", fault_server.url(mode), "--model", "m", "--rate", "inf", "--no-store")
    outcome = run_cli(*argv, "--out", str(out), *extra)
    assert outcome.code == 0, outcome.stderr
    return outcome, json.loads(out.read_text())["serving"]


def test_a_server_whose_words_cost_differently_gets_prompts_of_the_asked_length(
    run_cli: Any, tmp_path: Path
) -> None:
    """Mode words: a BOS and ceil(letters / 3) a word. 16 words would be 28 or 29 tokens; the
    probes say what each word costs and every prompt is 16 (18 prompts: each first word once)."""
    outcome, serving = _bench(run_cli, tmp_path / "w.json", "words", "-n", "18", "--input-len", "16")
    assert [t["usage_prompt_tokens"] for t in serving["traces"]] == [16] * 18
    assert [t["input_len"] for t in serving["traces"]] == [16] * 18
    calibration = serving["prompt_calibration"]
    assert calibration["first"]["quick"] == 3 and calibration["after"]["quick"] == 2
    assert calibration["first"]["a"] == 2 and calibration["after"]["a"] == 1
    assert serving["prompt_tokens"]["mean"] == 16 and serving["prompts_off_length"] == 0
    assert "warning" not in outcome.stderr
    naive = [1 + sum(-(-len(WORDS[(i + j) % 18]) // 3) for j in range(16)) for i in range(18)]
    assert set(naive) == {28, 29}  # what one word a token would have sent


def test_a_prompt_the_server_counts_off_its_asked_length_is_warned_of(run_cli: Any, tmp_path: Path) -> None:
    """Mode ok counts a BOS: a prompt of 1 token cannot be made (a word and the BOS are 2)."""
    outcome, serving = _bench(run_cli, tmp_path / "o.json", "ok", "-n", "3", "--input-len", "1")
    assert serving["prompts_off_length"] == 3
    assert (
        "warning: 3 of 3 prompts are more than 5% from the length asked (request 0: asked 1, "
        "the server counted 2)" in outcome.stderr
    )


def test_a_server_without_prompt_counts_leaves_the_lengths_uncalibrated_and_says_so(
    run_cli: Any, tmp_path: Path
) -> None:
    outcome, serving = _bench(run_cli, tmp_path / "n.json", "no-prompt-count", "-n", "3", "--input-len", "8")
    assert serving["prompt_calibration"] == {
        "calibrated": False,
        "reason": "36 of 36 probes got no usage.prompt_tokens",
    }
    assert "warning: prompt lengths were not calibrated (36 of 36 probes" in outcome.stderr
    assert [len(t["input_len"] * "x") for t in serving["traces"]] == [8] * 3
    assert serving["prompt_tokens"] is None  # nothing measured them
