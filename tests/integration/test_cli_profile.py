"""`flowrate run --profile DIR` on a CPU: the files, the operator table against the counter, the roof's
verdicts on a GEMM and a layer norm, and a timed run the profile leaves alone; `estimate --check`'s
per-operator view of it; and `flowrate generate --profile DIR`."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import flowrate
from flowrate.harness import profiling
from flowrate.harness.profile_table import profiler_name
from flowrate.harness.profiling import PROFILED_STEPS, TABLE_CSV, TABLE_JSON, TRACE
from flowrate.measure import env
from flowrate.measure.peaks import DevicePeak, registered_peaks
from flowrate.results.schema import IntervalRecord, Result

TINY = ("-p", "transformer", "--size", "debug", "--batch-size", "2", "--preheat", "1", "--steps", "4")


def _table(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / TABLE_JSON).read_text())
    return data


def test_profile_writes_the_trace_and_a_table_that_adds_up_and_matches_the_counter(  # type: ignore[no-untyped-def]
    run_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, out = tmp_path / "profile", tmp_path / "run.json"
    with registered_peaks(_fake_cpu(monkeypatch)):  # a device the cost model prices
        done = run_cli(
            "run", *TINY, "--profile", str(folder), "--price-per-hour", "3.6", "-o", str(out), "--no-store"
        )
    assert done.code == 0, done.stderr
    assert sorted(p.name for p in folder.iterdir()) == sorted([TRACE, TABLE_JSON, TABLE_CSV])

    # the trace is Chrome trace JSON: an object whose traceEvents each have a phase and a name
    trace = json.loads((folder / TRACE).read_text())
    events = trace["traceEvents"]
    assert events and all("ph" in e and "name" in e for e in events)
    steps = [e for e in events if e["name"].startswith("ProfilerStep#")]
    assert len(steps) == PROFILED_STEPS and all(e["ph"] == "X" and e["dur"] > 0 for e in steps)

    # the operators' self times add up to the profiled steps' time (within 5%)
    table = _table(folder)
    total = sum(row["seconds"] for row in table["operators"])
    assert total == pytest.approx(table["seconds"], rel=0.05)

    # FLOPs per operator are the counter's: the run counted one step before its clock started
    result = Result.load(out)
    assert result.operators is not None
    counted: dict[str, int] = defaultdict(int)
    for op in result.operators.ops:
        counted[profiler_name(op.op)] += op.flops * PROFILED_STEPS
    with_flops = {row["op"]: row["flops"] for row in table["operators"] if row["flops"]}
    assert with_flops == {op: flops for op, flops in counted.items() if flops}

    # the record keeps the summary; the console and `flowrate show` print it, the cost beside it
    assert result.profile is not None and result.profile.directory == str(folder)
    assert result.profile.steps == PROFILED_STEPS and result.profile.seconds == table["seconds"]
    assert result.cost is not None and result.cost.price_per_hour == 3.6
    for text in (done.stderr, run_cli("show", str(out)).stdout):
        assert f"profile      {PROFILED_STEPS} steps in" in text
        assert "breakdown    compute" in text and "samples/$" in text
        assert "roof         — (no peak: bound unknown" in text or "ridge" in text

    # estimate --check sets each operator class's predicted time beside its measured, per step:
    # the classes' predictions are the cost model's step, their measured times the table's
    assert result.estimate is not None and result.estimate.step_s
    checked = run_cli("estimate", "--check", str(out), "--json")
    assert checked.code == 0, checked.stderr
    [view] = checked.json()["operators"]
    classes = {c["op_class"]: c for c in view["classes"]}
    assert {"matmul", "attention", "embedding", "elementwise", "framework"} <= classes.keys()
    assert sum(c["predicted_s"] for c in view["classes"]) == pytest.approx(result.estimate.step_s)
    measured = sum(c["measured_s"] for c in view["classes"]) * PROFILED_STEPS
    assert measured == pytest.approx(sum(row["seconds"] for row in table["operators"]))
    assert sorted(view["mispriced"]) == sorted(c["op_class"] for c in view["classes"] if c["mispriced"])
    text = run_cli("estimate", "--check", str(out))
    assert f"predicted against measured per operator class: run {result.run_id[:8]}" in text.stdout
    assert "mispriced (outside ±30%)" in text.stderr or "every class within ±30%" in text.stderr


@pytest.mark.slow
def test_the_profile_comes_after_the_timed_run_and_changes_no_figure(tmp_path: Path) -> None:
    def fake_clock() -> Any:
        now = [0.0]

        def read() -> float:
            now[0] += 0.25
            return now[0]

        return read

    folder = tmp_path / "profile"
    seen: list[list[str]] = []

    def at_sample_point(interval: IntervalRecord) -> None:  # nothing profiled yet at any sample point
        seen.append(sorted(p.name for p in folder.iterdir()) if folder.exists() else [])

    options = {"steps": 6, "sample_every": 2, "preheat_steps": 1, "batch_size": 4}
    plain = flowrate.benchmark("fc_mnist", clock=fake_clock(), **options)
    profiled = flowrate.benchmark(
        "fc_mnist", clock=fake_clock(), on_interval=at_sample_point, profile_dir=str(folder), **options
    )
    assert seen == [[], [], []]
    assert profiled.profile is not None and plain.profile is None

    def figures(result: Result) -> tuple[Any, ...]:
        rows = [
            (i.steps, i.samples, i.seconds, i.samples_per_sec, i.global_samples_per_sec)
            for i in result.intervals
        ]
        s = result.summary
        return (
            rows,
            s.intervals,
            s.samples_per_sec,
            s.rate_samples_per_sec,
            s.timed_steps,
            s.timed_duration_s,
        )

    assert figures(profiled) == figures(plain)
    assert len(profiled.intervals) == 3


def _fake_cpu(monkeypatch: pytest.MonkeyPatch) -> DevicePeak:
    """A roof of 1 GFLOP/s and 100 MB/s (ridge 10 FLOP/B) for this CPU, in the profile alone."""
    monkeypatch.setattr(profiling, "device_name", lambda device: "Fake Profiled CPU")
    monkeypatch.setattr(env, "device_name", lambda device: "Fake Profiled CPU")  # the cost model's
    return DevicePeak(
        name="Fake Profiled CPU",
        match=("fake", "profiled", "cpu"),
        dense_flops={"fp32": 1e9},
        memory_bandwidth=1e8,
        host_link_bandwidth=None,
        source="a roof for tests",
    )


@pytest.mark.parametrize(
    ("problem", "options", "op", "bound"),
    [
        # 2·256³ FLOPs over 3·256²·4 bytes: 43 FLOP/B, above the ridge
        ("gemm", {"m": 256, "n": 256, "k": 256}, "aten::mm", "compute"),
        # no FLOPs, 2 x 4 MiB moved: below the ridge
        ("layernorm", {"rows": 1024, "hidden": 1024}, "aten::native_layer_norm", "memory"),
    ],
)
def test_gemms_are_compute_bound_and_layer_norms_memory_bound(
    problem: str,
    options: dict[str, int],
    op: str,
    bound: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with registered_peaks(_fake_cpu(monkeypatch)):
        result = flowrate.benchmark(
            problem, problem_options=options, steps=2, preheat_steps=1, profile_dir=str(tmp_path)
        )
    assert result.profile is not None
    assert (result.profile.peak_flops, result.profile.peak_bandwidth) == (1e9, 1e8)
    rows = {row["op"]: row for row in _table(tmp_path)["operators"]}
    assert rows[op]["bound"] == bound
    assert rows[op]["flops"] == (2 * 256**3 * PROFILED_STEPS if problem == "gemm" else 0)
    if problem == "gemm":  # the cost model's datasheet device: 80% of the peak, 12 µs per kernel inferring
        # of which the step waits for half: the output's clone is queued while the GEMM runs
        assert result.profile.cost_model_reason is None
        assert rows[op]["predicted_s"] == pytest.approx(PROFILED_STEPS * (2 * 256**3 / 0.8e9 + 12e-6 / 2))


def test_profile_with_repeat_is_refused_before_any_run(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    done = run_cli("run", *TINY, "--repeat", "2", "--profile", str(tmp_path / "p"), "--no-store")
    assert done.code == 2
    assert done.stderr == "error: --profile: profiles the steps of one run: give it without --repeat\n"
    assert not (tmp_path / "p").exists()


GENERATE = ("generate", "-p", "transformer", "--size", "debug", "-b", "2", "--prompt-len", "4")
GENERATE_SMALL = (*GENERATE, "--new-tokens", "3", "--repeats", "2", "--warmup", "0")


def test_generate_profiles_short_generations_after_the_timed_ones(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder, out = tmp_path / "profile", tmp_path / "generate.json"
    done = run_cli(*GENERATE_SMALL, "--profile", str(folder), "-o", str(out), "--no-store")
    assert done.code == 0, done.stderr
    trace = json.loads((folder / TRACE).read_text())  # Chrome trace JSON, one event per step
    steps = [e for e in trace["traceEvents"] if e["name"].startswith("ProfilerStep#")]
    assert len(steps) == PROFILED_STEPS and all(e["ph"] == "X" for e in steps)
    table = _table(folder)
    assert sum(row["seconds"] for row in table["operators"]) == pytest.approx(table["seconds"], rel=0.05)

    result = Result.load(out)
    assert result.generation is not None and result.profile is not None
    assert result.profile.steps == PROFILED_STEPS and result.profile.seconds == table["seconds"]
    assert result.profile.unit == "generations of 3 tokens (a prefill and 2 decode steps each)"
    assert "not a generation's prefill and decode" in (result.profile.cost_model_reason or "")
    assert {c.op_class for c in result.profile.classes} >= {"matmul", "attention", "embedding"}
    # the profiled generations come after the timed ones: the timed figures count the same
    plain = Result.load(_generated(run_cli, tmp_path / "plain.json"))
    assert len(result.intervals) == result.summary.intervals == 2
    assert (len(plain.intervals), plain.summary.intervals) == (2, 2) and plain.profile is None
    for text in (done.stderr, run_cli("show", str(out)).stdout):
        assert "profile           3 generations of 3 tokens" in text and "breakdown" in text


def _generated(run_cli, out: Path) -> Path:  # type: ignore[no-untyped-def]
    assert run_cli(*GENERATE_SMALL, "-o", str(out), "--no-store").code == 0
    return out


def test_generate_refuses_a_profile_folder_it_cannot_make_before_any_run(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = run_cli(*GENERATE_SMALL, "--profile", str(blocker / "profile"), "--no-store")
    assert done.code == 2
    assert done.stderr == f"error: --profile: cannot make {blocker / 'profile'}: {blocker} is not a folder\n"
