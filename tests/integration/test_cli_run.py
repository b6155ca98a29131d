"""`flowrate run` end to end on tiny sizes: the JSON result checked field by field."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from flowrate.measure import freed_memory
from flowrate.results.schema import SCHEMA_VERSION, Result

FAST = ("--preheat", "1")


def test_run_json_field_by_field(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli(
        "run",
        "--problem",
        "transformer",
        "--size",
        "debug",
        "--steps",
        "9",
        "--sample-every",
        "3",
        "--batch-size",
        "3",
        "--json",
        *FAST,
    )
    assert out.code == 0, out.stderr
    data = out.json()
    assert data["schema_version"] == SCHEMA_VERSION
    assert len(data["run_id"]) == 12
    config = data["config"]
    assert (config["problem"], config["size"], config["mode"], config["precision"]) == (
        "transformer",
        "debug",
        "train",
        "fp32",
    )
    assert (config["steps"], config["sample_every"], config["preheat_steps"]) == (9, 3, 1)
    assert data["batch_size"] == 3
    problem = data["problem"]
    assert problem["name"] == "transformer" and problem["size"] == "debug"
    assert problem["parameters"] == problem["parameters_built"] > 0
    assert problem["tokens_per_sample"] == problem["settings"]["seq_len"] == 32
    assert problem["model_flops_per_sample"] == problem["train_flops_per_sample"]
    assert problem["blocks"] == 2 + problem["settings"]["layers"]

    intervals = data["intervals"]
    assert [(i["index"], i["first_step"], i["steps"], i["samples"]) for i in intervals] == [
        (0, 0, 3, 9),
        (1, 3, 3, 9),
        (2, 6, 3, 9),
    ]
    assert all(i["kind"] == "compute" for i in intervals)
    rate = None
    elapsed = 0.0
    total = 0
    for i in intervals:  # the recorded Rate and GlobalRate follow from the raw intervals
        assert i["samples_per_sec"] == pytest.approx(i["samples"] / i["seconds"])
        rate = i["samples_per_sec"] if rate is None else 0.6 * i["samples_per_sec"] + 0.4 * rate
        assert i["rate_samples_per_sec"] == pytest.approx(rate)
        elapsed += i["seconds"]
        total += i["samples"]
        assert i["elapsed_s"] == pytest.approx(elapsed)
        assert i["global_samples_per_sec"] == pytest.approx(total / elapsed)

    s = data["summary"]
    assert (s["timed_steps"], s["timed_samples"], s["intervals"], s["sample_every_steps"]) == (
        9,
        27,
        3,
        3,
    )
    assert s["samples_per_sec"] == pytest.approx(27 / s["timed_duration_s"])
    assert s["rate_samples_per_sec"] == pytest.approx(rate)
    assert s["steps_per_sec"] == pytest.approx(s["samples_per_sec"] / 3)
    assert s["tokens_per_sec"] == pytest.approx(s["samples_per_sec"] * 32)
    assert s["model_flops_per_sec"] == pytest.approx(s["samples_per_sec"] * problem["train_flops_per_sample"])
    local = sorted(i["samples_per_sec"] for i in intervals)
    assert s["median_samples_per_sec"] == pytest.approx(local[1])
    assert s["min_samples_per_sec"] == local[0] and s["max_samples_per_sec"] == local[2]
    assert s["p5_samples_per_sec"] is None  # fewer than 20 intervals
    assert s["ci95_low_samples_per_sec"] < s["mean_samples_per_sec"] < s["ci95_high_samples_per_sec"]
    assert len(data["losses"]) == 9 and all(math.isfinite(v) for v in data["losses"])
    assert s["final_loss"] == data["losses"][-1]
    assert abs(data["losses"][0] - math.log(512)) < 1.0  # near ln(vocab) at the start

    env = data["environment"]
    for key in (
        "flowrate",
        "command_line",
        "python",
        "torch",
        "device",
        "cpu",
        "memory",
        "os",
        "env_vars",
    ):
        assert key in env
    assert env["device"]["type"] == "cpu"
    assert env["torch"]["version"].startswith("2.")
    assert "transformer/debug" in out.stderr  # the human summary goes to stderr


def test_run_infer_writes_result_file(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "results" / "r.json"
    out = run_cli(
        "run",
        "-p",
        "fc_mnist",
        "--size",
        "debug",
        "--mode",
        "inference",
        "--steps",
        "4",
        "--out",
        str(target),
        "--quiet",
        *FAST,
    )
    assert out.code == 0, out.stderr
    assert out.stdout == ""  # no --json: nothing on stdout
    result = Result.load(target)
    assert result.config.mode == "infer"
    assert result.problem.model_flops_per_sample == result.problem.forward_flops_per_sample
    assert result.summary.timed_steps == 4
    assert Result.from_json(result.to_json()) == result  # round trip is exact
    assert not list(target.parent.glob(".*tmp"))  # atomic write leaves no temporary file


def test_sample_shape_and_shape_options(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli(
        "run",
        "-p",
        "transformer",
        "--size",
        "debug",
        "--sample-shape",
        "16",
        "--layers",
        "1",
        "--steps",
        "2",
        "--json",
        "--quiet",
        *FAST,
    )
    assert out.code == 0, out.stderr
    data = out.json()
    assert data["problem"]["settings"]["seq_len"] == 16
    assert data["problem"]["settings"]["layers"] == 1
    assert data["problem"]["size"] == "debug+custom"
    assert data["config"]["problem_options"] == {"seq_len": 16, "layers": 1}


def test_duration_mode_measures_until_both_minimums(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli(
        "run",
        "-p",
        "fc_mnist",
        "--size",
        "debug",
        "--duration",
        "0.3",
        "--min-steps",
        "5",
        "--json",
        "--quiet",
        *FAST,
    )
    assert out.code == 0, out.stderr
    s = out.json()["summary"]
    assert s["timed_steps"] >= 5 and s["timed_duration_s"] >= 0.3


def test_list_shows_every_family(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("list", "--json")
    assert out.code == 0
    rows = json.loads(out.stdout)
    families = {r["family"] for r in rows}
    models = {"fc_mnist", "transformer", "bert-base", "roberta-large", "resnet50"}
    kernels = {"gemm", "bmm", "conv2d", "attention", "layernorm", "copy", "h2d", "d2h", "duplex", "launch"}
    kernels |= {"allreduce", "allgather", "reducescatter", "broadcast"}
    assert families == models | kernels
    sizes = {(r["family"], r["size"]): r["parameters"] for r in rows}
    assert sizes[("transformer", "gpt2")] == 124_439_808
    assert sizes[("resnet50", "default")] == 25_557_032
    assert all(("debug" in {s for f, s in sizes if f == fam}) for fam in families)
    table = run_cli("list")
    assert "gpt2-xl" in table.stdout and "roberta-large" in table.stdout and "gemm" in table.stdout


NO_BLOCKS = """
import torch
from torch import nn
import flowrate

class NoBlocks(flowrate.Problem):
    def build_model(self):
        return nn.Linear(8, 4)

    def make_batch(self, batch_size, device, generator):
        x = torch.randn(batch_size, 8, device=device, generator=generator)
        return x, torch.randint(0, 4, (batch_size,), device=device, generator=generator)

    def loss(self, model, batch):
        return nn.functional.cross_entropy(model(batch[0]), batch[1])

    def parameter_count(self):
        return 36

    def forward_flops_per_sample(self):
        return 64
"""


def test_user_problem_without_blocks_runs_resident(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "plain.py"
    path.write_text(NO_BLOCKS)
    out = run_cli("run", "--problem", f"{path}:NoBlocks", "--steps", "3", "--json", *FAST)
    assert out.code == 0, out.stderr
    data = out.json()
    assert data["problem"]["blocks"] is None
    assert data["problem"]["name"] == "custom"
    assert data["problem"]["model_flops_per_sample"] == 3 * 64
    assert "no blocks declared" in out.stderr


_THREE_RUNS = """
import json, flowrate
runs = [flowrate.benchmark("fc_mnist", size="debug", steps=2, preheat_steps=1, freed_memory=setting)
        for setting in ("release", "keep", "release")]
print(json.dumps([[r.config.freed_memory, r.environment.freed_memory, r.warnings] for r in runs]))
"""


@pytest.mark.skipif(not freed_memory.is_glibc(), reason="mallopt is glibc's")
def test_freed_memory_is_released_by_default_and_a_release_after_keep_is_recorded_kept() -> None:
    # one library user's process: release (the default), keep, then release, which cannot be had
    out = subprocess.run([sys.executable, "-c", _THREE_RUNS], capture_output=True, text=True, check=True)
    first, kept, after = json.loads(out.stdout.splitlines()[-1])
    assert first[:2] == ["release", "released (glibc's default: large blocks unmapped, the heap trimmed)"]
    assert kept[:2] == ["keep", "kept (glibc mallopt: no mmap for large blocks, no trimming)"]
    assert after[0] == "release" and after[1].startswith("kept (an earlier run in this process kept it")
    assert [w for w in after[2] if "freed host memory" in w] == [
        "freed host memory was kept, not released as asked: an earlier run in this process kept it "
        "(--freed-memory keep), which cannot be undone; measure release in a fresh process"
    ]
    assert not [w for w in first[2] + kept[2] if "freed host memory" in w]


def _flowrate(*args: str) -> str:
    """What the command printed, status and data alike."""
    command = [sys.executable, "-m", "flowrate", *args]
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    return out.stdout + out.stderr


@pytest.mark.skipif(not freed_memory.is_glibc(), reason="mallopt is glibc's")
def test_a_cpu_run_is_advised_to_try_keep_once_and_a_keep_run_is_labelled(tmp_path: Path) -> None:
    run = ["run", "-p", "fc_mnist", "--size", "debug", "--steps", "2", "--no-store", "--device", "cpu", *FAST]
    shown = {}
    for setting in ("release", "keep"):  # each in a fresh process: keeping cannot be undone
        path = str(tmp_path / f"{setting}.json")
        printed = _flowrate(*run, "--freed-memory", setting, "--out", path)
        assert " ".join(printed.split()).count("--freed-memory keep") == 1  # said once
        shown[setting] = " ".join(_flowrate("show", path).split())  # the table wraps its cells
    assert (
        "host memory freed memory released (the C library's default); `--freed-memory keep` may raise "
        "samples/s on CPU (the step's freed memory is reused instead of refaulted; "
        "benchmarks/freed_memory.py measures it)"
    ) in shown["release"]
    assert "host memory freed memory kept (--freed-memory keep)" in shown["keep"]
    assert "may raise" not in shown["keep"]
    assert json.loads((tmp_path / "keep.json").read_text())["config"]["freed_memory"] == "keep"
    assert json.loads((tmp_path / "release.json").read_text())["config"]["freed_memory"] == "release"
