"""The survey's CUDA figures on a real GPU: the host link pinned, pageable and duplex, launch to
completion, attention, the reference model's figures and NVML power. `pytest -m gpu` on a lent GPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from flowrate.harness.survey import SurveyConfig, run_survey
from flowrate.measure.peaks import peak_for

pytestmark = pytest.mark.gpu


def test_the_survey_measures_every_cuda_figure() -> None:
    config = SurveyConfig(device="cuda", quick=True, seconds=0.2, precisions=("bf16",))
    result = run_survey(config)
    assert result.survey is not None
    figures = {f.name: f for f in result.survey.figures}
    measured = [
        "matmul bf16",
        "attention bf16",
        "copy",
        "h2d pinned",
        "d2h pinned",
        "h2d pageable",
        "d2h pageable",
        "duplex pinned",
        "launch",
        "launch to completion",
        "train transformer/gpt2",
        "infer transformer/gpt2",
        "generate transformer/gpt2",
    ]
    assert all((figures[n].value or 0) > 0 for n in measured), {n: figures[n] for n in measured}
    # pinned copies are at least as fast as pageable ones; duplex moves more than one direction
    assert figures["h2d pinned"].value >= 0.9 * figures["h2d pageable"].value  # type: ignore[operator]
    assert figures["duplex pinned"].value > figures["h2d pinned"].value  # type: ignore[operator]
    assert figures["launch to completion"].value > figures["launch"].value  # type: ignore[operator]
    assert figures["allreduce busbw"].value is None
    if peak_for(result.survey.device or "", "bf16").entry is not None:
        assert figures["duplex pinned"].datasheet == 2 * figures["h2d pinned"].datasheet  # type: ignore[operator]
        assert figures["matmul bf16"].within_band and figures["attention bf16"].within_band
    power = figures["power"]
    device = result.environment.device
    nvml = device.extra.get("nvml") if device else None
    if isinstance(nvml, dict) and nvml.get("available"):
        assert power.value is not None and power.value > 0, power.reason
        # within 1.05 of the limit, and the counter's step over a short window (survey_model)
        assert power.fraction is not None and power.within_band, power


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs: an all-reduce needs two ranks")
def test_the_survey_under_torchrun_measures_the_nccl_allreduce(tmp_path: Path) -> None:
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    done = subprocess.run(
        [*launch, "-m", "flowrate", "survey", "--quick", "--seconds", "0.5", "--json", "--no-store", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    [figure] = json.loads(done.stdout)["survey"]["figures"]
    assert figure["name"] == "allreduce busbw" and figure["value"] > 1e9  # NVLink or PCIe: GB/s
    assert "2 ranks (nccl)" in figure["detail"]
