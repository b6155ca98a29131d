"""`flowrate sweep --generate` end to end: real generations of the tiny zoo transformer, each in a
process of its own, recorded with the sweep; run again, it resumes and runs nothing; bad keys are
one line before anything runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flowrate.results.metrics import get_metric
from flowrate.results.store import Store
from flowrate.results.store_filter import RunFilter
from flowrate.units import rate

GENERATE = (
    "sweep", "--generate", "-p", "transformer", "--size", "debug", "--device", "cpu", "--max-batch-size", "2",
    "-g", "batch_size=1,auto", "-g", "prompt_len=6", "-g", "new_tokens=3", "-g", "repeats=2",
    "-g", "warmup=0", "--name", "decode",
)  # fmt: skip


def test_a_generate_sweep_records_generations_and_resumes(run_cli, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli(*GENERATE, "-t", "ci")
    assert outcome.code == 0, outcome.stderr
    assert "point 1/2 batch_size=1 " in outcome.stderr and " decode tokens/s, TTFT " in outcome.stderr
    with Store(results_store, create=False) as store:
        [sweep] = store.sweeps()
        runs = store.runs(RunFilter(tag="sweep:decode"))
        points = store.sweep_points(sweep["sweep_id"])
    assert sweep["spec"]["command"] == "generate" and sweep["done"] == 2
    assert {p.run_id for p in points.values()} == {r.run_id for r in runs}
    by_batch = {r.batch_size: r.result for r in runs}
    assert sorted(by_batch) == [1, 2]  # auto: as many as fit, at most --max-batch-size
    assert by_batch[2].generation is not None and by_batch[2].generation.memory.batch_size_auto is True
    for result in by_batch.values():
        g = result.generation
        assert result.config.mode == "generate" and g is not None
        assert (g.prompt_len, g.new_tokens, len(g.requests)) == (6, 3, 2)
        assert g.decode_tokens_per_sec > 0
        assert rate(g.decode_tokens_per_sec) in outcome.stdout  # the table shows it, as it formats it
    pids = {r.environment.process_id for r in by_batch.values()}
    assert len(pids) == 2 and os.getpid() not in pids
    assert all(set(r.tags) == {"ci", "sweep:decode"} for r in runs)

    again = run_cli(*GENERATE, "-t", "ci")
    assert again.code == 0, again.stderr
    assert "resuming sweep decode" in again.stderr and "2 of 2 points recorded" in again.stderr
    assert again.stdout.count("recorded earlier") == 2 and "decode tokens/s" in again.stdout
    with Store(results_store, create=False) as store:
        assert len(store.runs()) == 2  # nothing ran again

    # the generation figures are metrics by name: read from the runs, ranked by pareto
    g = by_batch[2].generation
    assert get_metric("decode-tokens-per-sec").value(by_batch[2]) == g.decode_tokens_per_sec
    assert get_metric("ttft_ms").value(by_batch[2]) == pytest.approx(g.ttft_s.median * 1e3)
    assert get_metric("tpot_ms").value(by_batch[2]) == pytest.approx(g.tpot_s.median * 1e3)
    assert get_metric("prefill_tokens_per_sec").value(by_batch[2]) == g.prefill_tokens_per_sec
    ranked = run_cli(
        "pareto",
        "--tag",
        "sweep:decode",
        "--objective",
        "decode_tokens_per_sec:max",
        "--objective",
        "ttft_ms:min",
    )
    assert ranked.code == 0, ranked.stderr
    assert "decode tokens/s" in ranked.stdout and "TTFT median" in ranked.stdout
    shown = run_cli("show", by_batch[2].run_id)
    assert shown.code == 0 and f"flowrate generate {by_batch[2].run_id}" in shown.stdout


def test_a_sweep_file_can_say_generate(run_cli, tmp_path: Path, results_store: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "decode.toml"
    path.write_text(
        'command = "generate"\n[base]\nproblem = "transformer"\nsize = "debug"\nnew_tokens = 4\n'
        '[grid]\nbatch_size = "1..4"\nprompt_len = [8, 16]\n'
    )
    outcome = run_cli("sweep", "--file", str(path), "--dry-run")
    assert outcome.code == 0, outcome.stderr
    assert "6 points, 0 recorded" in outcome.stderr and outcome.stdout.count("to run") == 6


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ("-g", "prompt=4"),
            "error: --grid: generate sweeps have no option 'prompt' (did you mean prompt_len",
        ),
        (("--steps", "3", "-g", "batch_size=1"), "error: --steps: generate sweeps have no option 'steps'"),
        (("--mode", "train", "-g", "batch_size=1"), "error: --mode: generate runs inference only"),
        (
            ("-g", "prompt_len=30", "-g", "new_tokens=4"),
            "exceed the model's context of 32 positions (point 1 of 1:",
        ),
        (("-p", "resnet50", "-g", "batch_size=1"), "generate needs a causal LM"),
    ],
)
def test_bad_input_to_a_generate_sweep_is_one_line(run_cli, args: tuple[str, ...], says: str) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli("sweep", "--generate", "-p", "transformer", "--size", "debug", *args)
    assert outcome.code == 2
    assert says in outcome.stderr
    assert len(outcome.stderr.strip().splitlines()) == 1 and "Traceback" not in outcome.stderr
