"""The launch kernel: µs per call from a fake clock, the steps/s ceiling, and end-to-end runs."""

from __future__ import annotations

import itertools

import pytest

from flowrate.cli.run_text import summary_rows
from flowrate.config import RunConfig
from flowrate.errors import ConfigError
from flowrate.harness.api import run_config
from flowrate.measure.census import launch_ceiling
from flowrate.problems.kernels.launch import LaunchConfig


def test_launch_ceiling() -> None:
    assert launch_ceiling(1000, 5e-6) == pytest.approx(200.0, rel=1e-12)
    assert launch_ceiling(0, 5e-6) is None  # no ops given
    assert launch_ceiling(10, 0.0) is None


def test_per_call_time_and_ceiling_from_a_fake_clock() -> None:
    # 1 ms per clock read: the first interval reads the clock twice, the others once, so 10
    # calls take 2 ms, then 1 ms, 1 ms, 1 ms: 200 µs, then 100 µs per call
    ticks = itertools.count()
    config = RunConfig(
        problem="launch",
        size="debug",
        problem_options={"ops": 50},
        steps=4,
        sample_every=1,
        preheat_steps=1,
        batch_size=10,
    )
    result = run_config(config, clock=lambda: next(ticks) * 1e-3)
    assert [(i.seconds, i.samples) for i in result.intervals] == [(0.002, 10), *[(0.001, 10)] * 3]
    rows = dict(summary_rows(result))
    assert rows["per call"] == (
        f"100 µs (median interval; 100 µs–200 µs over the intervals' min–max, CV {result.summary.cv:.1%})"
    )
    # 50 ops per step at 100 µs each: 5 ms a step at least
    assert rows["ceiling"] == "50 ops per step: launches alone cap a step at 200 steps/s"
    # the counted step: the 10 adds and the loss's sum, in fp32, carrying no FLOPs
    ops = {(o.op, tuple(o.dtypes)): o.calls for o in result.operators.ops}
    assert ops[("aten.add_", ("float32",))] == 10
    census = result.operators.census
    assert census.effective is None and census.formats["fp32"].flops == 0


def test_launch_run_end_to_end(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli(
        "run", "-p", "launch", "--size", "empty", "--steps", "2", "--sample-every", "1",
        "--preheat", "1", "--no-store", "--json",
    )  # fmt: skip
    assert out.code == 0, out.stderr
    data = out.json()
    assert data["batch_size"] == 1000  # calls per step by default
    assert data["problem"]["settings"] == {"elements": 0, "wait": 0, "ops": 0}
    assert data["problem"]["model_flops_per_sample"] == 0
    assert [i["samples"] for i in data["intervals"]] == [1000, 1000]
    text = run_cli(
        "run", "-p", "launch", "--steps", "2", "--batch-size", "10", "--preheat", "1", "--no-store"
    )
    assert text.code == 0, text.stderr
    labels = [line.split(" ")[0] for line in text.stderr.splitlines()]
    assert "per" in labels and "ceiling" not in labels  # no -O ops: no ceiling row


def test_bad_options_say_one_line(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("run", "-p", "launch", "-O", "wait=1", "--steps", "2", "--no-store")
    assert out.code == 2
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "wait=1" in errors[0] and "CUDA" in errors[0]
    assert "Traceback" not in out.stderr
    with pytest.raises(ConfigError, match="elements"):
        LaunchConfig(elements=-1)
    with pytest.raises(ConfigError, match="wait"):
        LaunchConfig(wait=2)
