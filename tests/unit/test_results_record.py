"""The benchmark record (benchmarks/record.py) and RESULTS.md made from it
(benchmarks/render_results.py): results round-trip through their files, a verdict follows its
target, and the same files always make the same bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmark_scripts import BENCHMARKS, load_benchmark

record = load_benchmark("record")
render_results = load_benchmark("render_results")
Figure, Target, Machine, Result = record.Figure, record.Target, record.Machine, record.Result

MACHINE = Machine(
    "AMD EPYC, torch 2.13.0+cpu, 2 threads",
    {"cpu_model": "AMD EPYC", "device_name": "AMD EPYC", "num_threads": 2, "torch_version": "2.13.0+cpu"},
    (1.5, 2.25, 3.0),
)


def _result(date: str, ratio: float, benchmark: str = "overhead") -> Result:
    return Result(
        benchmark=benchmark,
        command="python benchmarks/overhead.py --rounds 3 --seconds 1",
        commit="0123456789abcdef0123456789abcdef01234567",
        dirty=False,
        date=date,
        machine=MACHINE,
        figures=(
            Figure("fc_mnist ratio", ratio, "flowrate / hand loop", Target(">=", 0.98), "3 rounds"),
            Figure("fc_mnist hand loop", 47196.0, "samples/s"),
            Figure("peak", None, "FLOP/s", Target(">", 0), "no GEMM measured"),
        ),
        note="quiet machine",
    )


def test_a_result_round_trips_through_its_file_with_keys_sorted(tmp_path: Path) -> None:
    result = _result("2026-11-28T00:41:07Z", 0.995)
    path = record.write(result, tmp_path)
    assert path == tmp_path / "overhead" / "2026-11-28T00-41-07Z.json"
    assert record.from_json(path.read_text()) == result
    again = record.write(result, tmp_path)  # the same second: a file of its own, nothing overwritten
    assert again.name == "2026-11-28T00-41-07Z-2.json"
    assert again.read_text() == path.read_text()
    text = path.read_text()
    keys = [line.split('"')[1] for line in text.splitlines() if line.startswith('  "')]
    assert keys == sorted(keys) == [
        "benchmark", "command", "commit", "date", "dirty", "figures", "format", "machine", "note",
    ]  # fmt: skip
    assert '"verdict": "met"' in text and '"verdict": "no target"' in text and '"verdict": "missed"' in text


@pytest.mark.parametrize(
    ("comparison", "value", "verdict"),
    [(">=", 0.98, "met"), (">=", 0.979, "missed"), (">", 0.98, "missed"), ("<=", 0.98, "met"),
     ("<", 0.97, "met"), ("==", 0.0, "missed"), ("==", 0.98, "met")],
)  # fmt: skip
def test_a_verdict_follows_the_target(comparison: str, value: float, verdict: str) -> None:
    assert Figure("x", value, "", Target(comparison, 0.98)).verdict == verdict


def test_a_figure_not_measured_misses_its_target_and_one_without_a_target_has_none() -> None:
    assert Figure("x", None, "", Target(">=", 1)).verdict == "missed"
    assert Figure("x", 5.0).verdict == "no target"
    with pytest.raises(ValueError, match="one of >=, <=, >, <, =="):
        Target("~", 1.0)
    with pytest.raises(TypeError, match="figure 'x': its target is a Target or None, not 'a note'"):
        Figure("x", 1.0, "s", "a note")  # type: ignore[arg-type]  # the note given as the target


def test_the_newest_result_is_the_section_with_a_missed_target_shown_missed() -> None:
    text = render_results.render([_result("2026-11-28T00:41:07Z", 0.971)])
    assert "| fc_mnist ratio | 0.971 | flowrate / hand loop | >= 0.98 | **missed** | 3 rounds |" in text
    assert "| fc_mnist hand loop | 47,196 | samples/s | — | no target |  |" in text
    assert "| peak | — | FLOP/s | > 0 | **missed** | no GEMM measured |" in text
    assert "Newest: 2026-11-28T00:41:07Z, 0 of 2 targets met." in text
    assert "- Command: `python benchmarks/overhead.py --rounds 3 --seconds 1`" in text
    assert "- Commit: 0123456789" in text
    assert "- Machine: AMD EPYC, torch 2.13.0+cpu, 2 threads; load average 1.50 2.25 3.00" in text
    assert "Earlier results" not in text
    assert "[notes/diary-2026-11-21-to-27.md](notes/diary-2026-11-21-to-27.md)" in text


def test_earlier_results_are_the_history_newest_first() -> None:
    results = [
        _result("2026-11-27T10:00:00Z", 0.990),
        _result("2026-11-28T00:41:07Z", 0.995),
        _result("2026-11-27T22:00:00Z", 0.971),
    ]
    text = render_results.render(results)
    assert "Newest: 2026-11-28T00:41:07Z, 1 of 2 targets met." in text
    history = [line for line in text.splitlines() if line.startswith("| 2026-11-27")]
    assert [line.split(" | ")[0] for line in history] == ["| 2026-11-27T22:00:00Z", "| 2026-11-27T10:00:00Z"]
    assert "fc_mnist ratio 0.971 flowrate / hand loop (**missed**)" in history[0]
    assert "fc_mnist ratio 0.99 flowrate / hand loop (met)" in history[1]


def test_the_same_files_make_the_same_bytes_in_any_order(tmp_path: Path) -> None:
    results = [_result("2026-11-27T10:00:00Z", 0.99), _result("2026-11-28T00:41:07Z", 0.995, "kernels")]
    for result in results:
        record.write(result, tmp_path)
    first = render_results.render(render_results.load_all(tmp_path))
    assert render_results.render(render_results.load_all(tmp_path)) == first
    assert render_results.render(list(reversed(results))) == first
    assert "Newest: 2026-11-28T00:41:07Z, 1 of 2 targets met." in first
    untargeted = Result("kernels", "python k.py", None, None, "2026-11-28T00:00:00Z", MACHINE, ())
    assert "Newest: 2026-11-28T00:00:00Z, no figure has a target." in render_results.render([untargeted])
    assert "- Commit: not a checkout" in render_results.render([untargeted])
    assert first.index("## kernels") < first.index("## overhead")


def test_check_fails_on_a_stale_file_and_passes_once_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record.write(_result("2026-11-28T00:41:07Z", 0.995), tmp_path / "results")
    out = tmp_path / "RESULTS.md"
    paths = ["--results", str(tmp_path / "results"), "--output", str(out)]
    assert render_results.main([*paths, "--check"]) == 1
    assert capsys.readouterr().err == f"{out} is stale: run python benchmarks/render_results.py\n"
    assert render_results.main(paths) == 0
    written = out.read_bytes()
    assert render_results.main([*paths, "--check"]) == 0
    out.write_text(out.read_text() + "a hand edit\n")
    assert render_results.main([*paths, "--check"]) == 1
    assert render_results.main(paths) == 0 and out.read_bytes() == written


def test_a_file_that_is_not_a_result_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "overhead").mkdir()
    (tmp_path / "overhead" / "bad.json").write_text('{"format": 1, "benchmark": "overhead"}')
    (tmp_path / "overhead" / "c.json").write_text("{")  # sorted after: the first bad file is named
    code = render_results.main(["--results", str(tmp_path), "--output", str(tmp_path / "R.md")])
    assert code == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'overhead' / 'bad.json'}: not a benchmark result (it has no 'machine')\n"
    )


def test_serve_peers_records_each_peer_figure_within_10_percent_or_its_reread_within_3() -> None:
    serve_peers = load_benchmark("serve_peers")
    row = {"peer": "aiperf", "figure": "ttft_ms", "flowrate": 100.0, "peer_value": 80.0, "ratio": 1.25}
    rows = [
        {**row, "reread_ratio": 1.02, "definition": "from the request's send"},
        {**row, "figure": "tpot_ms", "ratio": 0.95, "reread_ratio": None, "definition": None},
    ]
    figures = serve_peers._figures(rows)
    assert [(f.name, f.value, f.verdict) for f in figures] == [
        ("aiperf ttft_ms: flowrate / peer", 1.25, "no target"),
        ("aiperf ttft_ms: flowrate / peer, off 1 by", 0.25, "missed"),
        ("aiperf ttft_ms: flowrate re-read / peer, off 1 by", 0.02, "met"),
        ("aiperf tpot_ms: flowrate / peer", 0.95, "no target"),
        ("aiperf tpot_ms: flowrate / peer, off 1 by", 0.05, "met"),
    ]
    assert figures[0].note == "flowrate 100, aiperf 80 (medians)"


def test_estimate_accuracy_records_each_set_against_its_share_of_rows_within_25_percent() -> None:
    accuracy = load_benchmark("estimate_accuracy")
    ratios = [1.0, 1.1, 0.8, 1.3, 0.6]  # 3 of 5 within ±25%

    def row(ratio: float) -> object:
        return accuracy.Row(False, "mlp", "debug", "train", 4, ratio, 1.0, ratio, 0.0, 1.0, 1.0, ratio * 2)

    figures = accuracy.set_figures([row(r) for r in ratios], "original", 19 / 20)
    assert [(f.name, f.value, f.unit, str(f.target), f.verdict) for f in figures] == [
        ("original: within ±25%", 3, "of 5", ">= 4.75", "missed"),
        ("original: median |error|", 0.2, "fraction", "None", "no target"),
        ("original: worst ratio", 0.6, "predicted / measured", "None", "no target"),
    ]
    without = accuracy.set_figures([row(r) for r in ratios], "original", 19 / 20, without_factor=True)
    assert (without[0].value, without[0].target) == (1, None)  # ratios x2: 1.2 alone within; no target


def test_every_benchmark_script_records_what_it_prints() -> None:
    """A script run from the command line ends by recording its figures (record.record), but for
    the record's own generator and the null server serve_client.py talks to."""
    helpers = {"render_results.py", "serve_null_server.py"}
    scripts = [p for p in sorted(BENCHMARKS.glob("*.py")) if "__main__" in p.read_text()]
    silent = [p.name for p in scripts if p.name not in helpers and "record(" not in p.read_text()]
    assert silent == []
    assert "overhead.py" in {p.name for p in scripts}
