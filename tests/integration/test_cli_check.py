"""`flowrate check` end to end: the loss falls, the result keeps its fidelity, and refusals are one line.

Exit codes: 0 the loss fell; 1 it did not (the result is still printed and written); 2 bad input,
including a problem that has no learnable task.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from flowrate.results.codec import encode
from flowrate.results.schema import Result

CHECK = ("check", "--problem", "fc_mnist", "--size", "debug", "--steps", "60", "--device", "cpu")

# The own-model guide's my_model example (docs/guides/own-model.md): a user problem with make_batch
# but no learnable_batch.
USER_PROBLEM = textwrap.dedent("""
    import torch
    from torch import nn
    from torch.nn import functional as F

    import flowrate


    class TwoLayerMLP(flowrate.Problem):
        name = "two_layer_mlp"
        default_batch_size = 64

        def build_model(self):
            return nn.Sequential(nn.Sequential(nn.Linear(256, 64), nn.GELU()), nn.Linear(64, 10))

        def make_batch(self, batch_size, device, generator):
            x = torch.randn(batch_size, 256, device=device, generator=generator)
            return x, torch.randint(0, 10, (batch_size,), device=device, generator=generator)

        def loss(self, model, batch):
            x, y = batch
            return F.cross_entropy(model(x).float(), y)

        def parameter_count(self):
            return 257 * 64 + 65 * 10

        def forward_flops_per_sample(self):
            return 2 * (256 * 64 + 64 * 10)

        def blocks(self, model):
            return list(model)


    def make_problem():
        return TwoLayerMLP()
""")


def test_check_json_has_a_falling_loss(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli(*CHECK, "--json")
    assert out.code == 0, out.stderr
    data = out.json()
    fidelity = data["fidelity"]
    assert fidelity["steps"] == 60 and len(data["losses"]) == 60
    assert fidelity["final_loss"] < fidelity["initial_loss"]
    assert fidelity["fell"] is True
    assert fidelity["task"].startswith("Class clusters")
    assert data["config"]["steps"] == 60 and data["config"]["preheat_steps"] == 0  # the check's default
    for label in ("task", "initial loss", "loss reached", "min loss", "fell"):
        assert re.search(rf"^{label}\s", out.stderr, re.M), label
    assert "not a throughput benchmark" in out.stderr


def test_check_defaults_to_300_steps_and_reports_steps_to_target(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli(*CHECK[:-4], "--device", "cpu", "--lr", "1e-3", "--target-loss", "0.5", "--json", "-q")
    assert out.code == 0, out.stderr
    fidelity = out.json()["fidelity"]
    assert fidelity["steps"] == 300 and fidelity["window"] == 30
    assert fidelity["target_loss"] == 0.5
    assert 30 <= fidelity["steps_to_target"] < 300
    assert "steps to target" not in out.stderr  # -q: warnings only


def test_check_out_file_reads_back_with_its_fidelity(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "results" / "check.json"
    out = run_cli(*CHECK, "--out", str(path), "--json", "-q")
    assert out.code == 0, out.stderr
    loaded = Result.load(path)
    assert loaded.fidelity is not None
    assert encode(loaded.fidelity) == out.json()["fidelity"]
    assert loaded.warnings[0].startswith("a check run is not a throughput benchmark")


def test_a_loss_that_does_not_fall_exits_1_after_reporting(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli(*CHECK[:-4], "--steps", "20", "--device", "cpu", "--lr", "1e-9", "--json")
    assert out.code == 1
    assert out.json()["fidelity"]["fell"] is False  # the result is still printed
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "did not fall" in errors[0]
    assert "Traceback" not in out.stderr


def test_a_problem_without_a_learnable_task_is_refused(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "my_model.py").write_text(USER_PROBLEM)
    out = run_cli("check", "--problem", f"{tmp_path / 'my_model.py'}:make_problem", "--device", "cpu")
    assert out.code == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error: --problem:") and "no learnable task" in lines[0]
    assert "learnable_batch" in lines[0]


def test_kernels_and_inference_cannot_be_checked(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("check", "--problem", "gemm", "--device", "cpu")
    assert out.code == 2 and "forward-only" in out.stderr
    out = run_cli(*CHECK, "--mode", "infer")
    assert out.code == 2 and "--mode" in out.stderr


def test_check_help_states_the_exit_codes(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("check", "--help")
    assert out.code == 0
    assert "--target-loss" in out.stdout
    assert "0 the loss fell" in " ".join(out.stdout.split())
