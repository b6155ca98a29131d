"""`flowrate run --execution streaming` end to end: the record says where the time went and what
memory was held; checkpoints hold the fp32 masters; bad input is one line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import torch

from conftest import FAST
from flowrate.execution.checkpoint import load_checkpoint
from flowrate.problems.registry import get_problem

TINY = ("-p", "transformer", "--size", "debug", *FAST, "--quiet", "--no-store")


def test_a_streamed_run_records_its_copies_and_memory(run_cli) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli(
        "run", *TINY, "--execution", "streaming", "--precision", "bf16", "--recompute", "--json"
    )
    assert outcome.code == 0, outcome.stderr
    result = outcome.json()
    assert result["config"]["execution"] == "streaming" and result["config"]["recompute"] is True
    streaming = result["streaming"]
    assert streaming["blocks"] == 4 and streaming["compute_dtype"] == "bfloat16"
    for key in (
        "copy_in_s_per_step",
        "copy_out_s_per_step",
        "optimizer_wait_s_per_step",
        "optimizer_s_total",
    ):
        assert streaming[key] >= 0
    assert 0 < streaming["device_weight_bytes_peak"] <= 2 * streaming["largest_block_bytes"]
    assert streaming["host_bytes"] > 0 and streaming["host_pinned"] is False
    shown = run_cli("run", *TINY[:-2], "--no-store", "--execution", "streaming")
    text = " ".join(shown.stderr.split())  # the table wraps with the terminal's width
    assert "streaming 4 blocks in float32" in text and "of copy-in hidden behind compute" in text


def test_a_streamed_checkpoint_holds_the_master_weights(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = run_cli(
        "run", *TINY, "--execution", "streaming", "--checkpoint-every", "2", "--checkpoint-dir", str(tmp_path)
    )
    assert outcome.code == 0, outcome.stderr
    saved = sorted(tmp_path.glob("step-*.pt"))
    assert [p.name for p in saved] == ["step-00000002.pt"]  # every 2 timed steps, before the last
    model = get_problem("transformer", "debug").build_model()
    assert load_checkpoint(saved[-1], model) == 2
    state = torch.load(saved[-1], weights_only=True)
    assert isinstance(state["optimizer"], list) and len(state["optimizer"]) == 4  # one per block
    assert all(v.dtype == torch.float32 for v in model.state_dict().values() if v.is_floating_point())


def test_streaming_bad_input_is_one_line(run_cli) -> None:  # type: ignore[no-untyped-def]
    fp16 = run_cli("run", *TINY, "--execution", "streaming", "--precision", "fp16")
    assert fp16.code == 2 and "--precision: --execution streaming keeps fp32 master weights" in fp16.stderr
    kernel = run_cli(
        "run", "-p", "gemm", "--size", "debug", *FAST, "--quiet", "--no-store", "--execution", "streaming"
    )
    assert kernel.code == 2 and "gemm is a single kernel: it has no blocks" in kernel.stderr
    assert len(kernel.stderr.strip().splitlines()) == 1
    limit = run_cli("run", *TINY, "--device-memory-limit", "1")
    assert limit.code == 2 and "--device-memory-limit: applies to CUDA devices" in limit.stderr
    recompute = run_cli("run", *TINY, "--recompute")
    assert recompute.code == 2 and "--recompute: applies to --execution streaming only" in recompute.stderr


REUSED_BLOCK = textwrap.dedent(
    """
    import torch
    from torch import nn

    import flowrate


    class Reused(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])

        def forward(self, x):
            return self.blocks[1](self.blocks[0](self.blocks[0](x)))  # block 0 runs twice


    class ReusedProblem(flowrate.Problem):
        name = "reused"

        def build_model(self):
            return Reused()

        def make_batch(self, batch_size, device, generator):
            return (torch.randn(batch_size, 8, generator=generator, device=device),)

        def loss(self, model, batch):
            return model(batch[0]).square().mean()

        def parameter_count(self):
            return 144

        def forward_flops_per_sample(self):
            return 384


    def make():
        return ReusedProblem()
    """
)


def test_a_users_model_that_reuses_a_block_is_refused_in_one_line(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "reused.py"
    path.write_text(REUSED_BLOCK)
    outcome = run_cli("run", "-p", f"{path}:make", *FAST, "--quiet", "--no-store", "--execution", "streaming")
    assert outcome.code == 2, outcome.stderr
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1 and "block 0 (Linear) ran twice in one forward" in lines[0]
    resident = run_cli("run", "-p", f"{path}:make", *FAST, "--quiet", "--no-store", "--resident-blocks", "1")
    assert (
        resident.code == 2 and "--resident-blocks: applies to --execution streaming only" in resident.stderr
    )
