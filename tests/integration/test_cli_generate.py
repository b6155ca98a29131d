"""`flowrate generate` end to end on tiny models: recorded, shown, and bad input refused in one line."""

from __future__ import annotations

import pytest

SMALL = ("--prompt-len", "6", "--new-tokens", "4", "--repeats", "2", "--warmup", "0")


@pytest.mark.parametrize(("problem", "kv_bytes"), [("transformer", 1024), ("hf:llama", 512)])
def test_generate_records_and_shows(run_cli, problem: str, kv_bytes: int) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("generate", "-p", problem, "--size", "debug", "-b", "2", "--json", *SMALL)
    assert out.code == 0, out.stderr
    data = out.json()
    g = data["generation"]
    assert (data["config"]["mode"], data["batch_size"]) == ("generate", 2)
    assert (g["batch_size"], g["prompt_len"], g["new_tokens"]) == (2, 6, 4)
    assert len(g["requests"]) == 2 and all(len(r["itl_s"]) == 3 for r in g["requests"])
    for r in g["requests"]:
        assert r["tpot_s"] == pytest.approx((r["e2e_s"] - r["ttft_s"]) / 3)
        assert r["e2e_s"] == pytest.approx(r["ttft_s"] + sum(r["itl_s"]))
    assert g["memory"]["kv_bytes_per_token"] == g["memory"]["kv_bytes_per_token_measured"] == kv_bytes
    assert g["decode_tokens_per_sec"] > 0 and g["prefill_tokens_per_sec"] > 0
    assert "recorded as run" in out.stderr

    shown = run_cli("show", data["run_id"])
    assert shown.code == 0, shown.stderr
    assert "TTFT" in shown.stdout and "decode" in shown.stdout and "tokens/s" in shown.stdout


def test_generate_batch_auto(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli(
        "generate",
        "-p",
        "transformer",
        "--size",
        "debug",
        "-b",
        "auto",
        "--max-batch-size",
        "3",
        "--json",
        *SMALL,
    )
    assert out.code == 0, out.stderr
    g = out.json()["generation"]
    assert g["batch_size"] == 3 and g["memory"]["batch_size_auto"] is True
    assert g["memory"]["max_batch_size"] >= 3


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ("-p", "transformer", "--size", "debug", "--prompt-len", "30", "--new-tokens", "3"),
            "exceed the model's context of 32",
        ),
        (("-p", "transformer", "--size", "debug", "--mode", "train"), "generate runs inference only"),
        (("-p", "bert-base", "--size", "debug"), "generate needs a causal LM"),
        (("-p", "resnet50", "--size", "debug"), "generate needs a causal LM"),
        (
            ("-p", "transformer", "--size", "debug", "-b", "many"),
            "--batch-size: must be a positive integer or 'auto'",
        ),
        (
            ("-p", "transformer", "--size", "debug", "--precision", "int8-weights"),
            "--precision: generate takes",
        ),
    ],
)
def test_bad_input_is_one_line(run_cli, args: tuple[str, ...], says: str) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("generate", *args)
    assert out.code == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], out.stderr
    assert "Traceback" not in out.stderr
