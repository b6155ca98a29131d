"""`flowrate run/check/list` on hf: models end to end; every mistake is one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FAST

pytest.importorskip("transformers")

TINY = ("-p", "hf:llama", *FAST, "--quiet", "--no-store")


def test_a_tiny_llama_run_records_its_model_and_costs(run_cli) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("run", *TINY, "--hf-config", "num_hidden_layers=3", "--seq-len", "16", "--json")
    assert outcome.code == 0, outcome.stderr
    result = outcome.json()
    assert result["config"]["problem_options"] == {"num_hidden_layers": "3", "seq_len": 16}
    problem = result["problem"]
    assert problem["name"] == "hf:llama" and problem["size"] == "debug+custom"
    assert problem["parameters"] == problem["parameters_built"]  # the formula's count is the model's
    assert problem["blocks"] == 6 and problem["tokens_per_sample"] == 16
    assert problem["settings"]["layers"] == 3 and problem["settings"]["task"] == "causal-lm"


def test_a_streamed_bf16_inference_run_of_an_encoder(run_cli) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli(
        "run", "-p", "hf:bert", *FAST, "-q", "--no-store", "--json", "--mode", "infer",
        "--execution", "streaming", "--precision", "bf16",
    )  # fmt: skip
    assert outcome.code == 0, outcome.stderr
    assert outcome.json()["streaming"]["blocks"] == 4  # embeddings, 2 layers, MLM head


def test_check_learns_the_task_of_a_tiny_llama(run_cli) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli(
        "check", "-p", "hf:llama", "--steps", "40", "--lr", "1e-3", "--device", "cpu", "-q", "--no-store"
    )
    assert outcome.code == 0, outcome.stderr


def test_list_source_hf_lists_architectures_and_presets(run_cli) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("list", "--source", "hf", "--json")
    assert outcome.code == 0, outcome.stderr
    names = [row["name"] for row in outcome.json()]
    assert "hf:llama" in names and "hf:llama --preset llama-3.2-1b" in names and "hf:vit" in names


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ("--hf-config", "num_layers=3"),
            "error: --hf-config num_layers=3: llama's config has no 'num_layers'",
        ),
        (("--hf-config", "num_hidden_layers"), "error: --hf-config: expected KEY=VALUE"),
        (("--preset", "llama-9b"), "error: --preset: unknown preset 'llama-9b'"),
        (("--preset", "llama-3.2-1b", "--size", "debug"), "error: --preset: names the size of an hf: model"),
    ],
)
def test_mistakes_are_one_line_and_exit_2(run_cli, args: tuple[str, ...], says: str) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("run", *TINY, *args)
    assert outcome.code == 2 and outcome.stderr.strip().startswith(says), outcome.stderr
    assert len(outcome.stderr.strip().splitlines()) == 1 and "Traceback" not in outcome.stderr


def test_a_folder_without_config_json_is_one_line(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("run", "-p", f"hf:{tmp_path}", *FAST, "-q", "--no-store")
    assert outcome.code == 2 and "has no config.json" in outcome.stderr
    assert len(outcome.stderr.strip().splitlines()) == 1


def test_a_missing_transformers_names_the_extra(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)  # as if it were not installed
    outcome = run_cli("run", *TINY)
    assert outcome.code == 2
    assert outcome.stderr.strip() == "error: hf:llama needs the `hf` extra: pip install -e '.[hf]'"


def test_a_saved_folder_runs(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from flowrate.problems.registry import get_problem

    get_problem("hf:gpt2", options={"n_layer": 1}).build_model().save_pretrained(tmp_path / "gpt")
    outcome = run_cli(
        "run", "-p", f"hf:{tmp_path / 'gpt'}", "--seq-len", "16", *FAST, "-q", "--no-store", "--json"
    )
    assert outcome.code == 0, outcome.stderr
    assert outcome.json()["problem"]["settings"]["layers"] == 1


@pytest.mark.slow
def test_a_two_rank_data_parallel_run_of_a_tiny_llama(tmp_path: Path) -> None:
    from test_data_parallel import FLOWRATE, launch

    run = [
        *FLOWRATE,
        "run",
        *TINY[:2],
        "--threads",
        "1",
        "--global-batch-size",
        "8",
        "--steps",
        "3",
        "--json",
    ]
    first, second = launch([run, run], tmp_path, timeout=240)
    assert first.code == 0 and second.code == 0, first.stderr + second.stderr
    assert '"world_size": 2' in first.stdout and second.stdout == ""


@pytest.mark.slow
def test_compile_runs_a_tiny_llama(run_cli) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("run", *TINY, "--compile", "--json")
    assert outcome.code == 0, outcome.stderr
    assert outcome.json()["compile"] is not None
