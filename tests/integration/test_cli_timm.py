"""`flowrate run|check|list` on timm models end to end: tiny models, tiny images, short runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from flowrate.problems.sources import timm_source

timm_source.library()  # timm (and a torchvision without its operators) load before the tests

FAST = ("--preheat", "1", "--steps", "4", "--sample-every", "2", "--device", "cpu")
VIT = ("--problem", "timm:vit_tiny_patch16_224", "--image-size", "32", "--hf-config", "depth=2")


def test_a_timm_vit_runs_with_the_librarys_counts(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("run", *VIT, *FAST, "--batch-size", "2", "--json", "--store", str(tmp_path / "runs.db"))
    assert out.code == 0, out.stderr
    data = out.json()
    problem = data["problem"]
    assert problem["name"] == "timm:vit_tiny_patch16_224" and problem["size"] == "custom"
    # timm.create_model("vit_tiny_patch16_224", img_size=32, depth=2): 1,231,912 parameters
    assert problem["parameters"] == problem["parameters_built"] == 1_231_912
    assert problem["blocks"] == 6  # patches, tokens, 2 transformer blocks, norm, head
    assert problem["settings"]["image_size"] == 32 and problem["settings"]["classes"] == 1000
    flops = data["flops"]
    # executed = model FLOPs + the Q·Kᵀ the fused attention backward recomputes (2·5²·192 per layer)
    assert flops["model_flops_per_sample"] == 30_168_576
    assert flops["executed_flops_per_sample"] == 30_168_576 + 2 * 2 * 5 * 5 * 192
    assert data["batch_size"] == 2 and len(data["intervals"]) == 2


def test_a_timm_convnet_streams_its_weights(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    args = ("--problem", "timm:test_resnet", "--image-size", "32", "--execution", "streaming")
    out = run_cli("run", *args, *FAST, "--batch-size", "4", "--json", "--store", str(tmp_path / "runs.db"))
    assert out.code == 0, out.stderr
    data = out.json()
    assert data["config"]["execution"] == "streaming"
    assert data["streaming"]["blocks"] == data["problem"]["blocks"] > 3


@pytest.mark.slow
def test_check_learns_a_timm_model(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    args = ("--problem", "timm:test_resnet", "--image-size", "32", "--hf-config", "num_classes=10")
    options = ("--steps", "30", "--batch-size", "16", "--device", "cpu", "--store", str(tmp_path / "runs.db"))
    out = run_cli("check", *args, *options, "--json")
    assert out.code == 0, out.stderr
    fidelity = out.json()["fidelity"]
    assert fidelity["fell"] is True and fidelity["final_loss"] < fidelity["initial_loss"]


def test_list_source_timm_lists_timms_models(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("list", "--source", "timm", "--json")
    assert out.code == 0, out.stderr
    names = [row["name"] for row in json.loads(out.stdout)]
    assert names == timm_source.library().list_models()


def test_an_unknown_timm_model_is_one_line_with_close_names(run_cli) -> None:  # type: ignore[no-untyped-def]
    out = run_cli("run", "--problem", "timm:vit_tiny_patch16_22", *FAST)
    assert out.code == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "unknown timm model 'vit_tiny_patch16_22'" in lines[0] and "'vit_tiny_patch16_224'" in lines[0]


def test_without_timm_the_cli_names_the_extra(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setitem(sys.modules, "timm", None)  # `import timm` raises ImportError
    out = run_cli("run", "--problem", "timm:resnet50", *FAST)
    assert out.code == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "timm:resnet50 needs the `timm` extra: pip install -e '.[timm]'" in lines[0]
