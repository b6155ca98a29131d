"""Data-parallel runs on the CPU with gloo: two real processes per test, as torchrun starts them.

The ranks are started here with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT), which is all torchrun gives its workers, so each rank can get its own command line:
that is how a configuration that differs on one rank, or a rank that dies, is staged.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from flowrate.results.schema import Result
from flowrate.results.store import Store

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
FLOWRATE = [sys.executable, "-m", "flowrate"]
TINY = ["-p", "fc_mnist", "--size", "debug", "--preheat", "2", "--threads", "1"]


@dataclass
class Rank:
    code: int
    stdout: str
    stderr: str


def launch(
    commands: list[list[str]], cwd: Path, timeout: float = 90, only_rank_0: bool = False
) -> list[Rank]:
    """Start one process per command as ranks 0, 1, … of a world; wait for all (never hang), or
    for rank 0 alone, killing the others then."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}
    start = time.monotonic()
    processes = []
    for rank, command in enumerate(commands):
        env = {
            **base,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(len(commands)),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
        processes.append(
            subprocess.Popen(
                command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    ranks = []
    try:
        for process in processes[:1] if only_rank_0 else processes:
            out, err = process.communicate(timeout=max(1.0, timeout - (time.monotonic() - start)))
            ranks.append(Rank(process.returncode, out, err))
    except subprocess.TimeoutExpired:
        pytest.fail(f"the ranks did not finish within {timeout} s: a rank hangs")
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    return ranks


def test_ddp_equals_one_process_on_the_concatenated_batch_and_streaming_equals_resident(
    tmp_path: Path,
) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import dp_worker

    worker = [sys.executable, str(Path(__file__).parent / "dp_worker.py"), str(tmp_path / "out")]
    for rank in launch([worker, worker], tmp_path):
        assert rank.code == 0, rank.stderr
    per_rank = [torch.load(tmp_path / f"out-{r}.pt") for r in (0, 1)]
    for name in dp_worker.PROBLEMS:
        both = [dp_worker.batches(name, r) for r in (0, 1)]
        joined = [
            tuple(torch.cat(parts) for parts in zip(*step, strict=True)) for step in zip(*both, strict=True)
        ]
        losses, weights = dp_worker.train(name, "resident", joined, None)  # one process, batch 2 x 4
        for execution in ("resident", "streaming"):
            (loss0, weights0), (loss1, weights1) = (saved[(name, execution)] for saved in per_rank)
            # DDP averages gradients over ranks: with equal per-rank batches, the mean over the global
            # batch; each rank's loss is its half's mean, so their average is the global batch's loss
            mean = [(a + b) / 2 for a, b in zip(loss0, loss1, strict=True)]
            assert mean == pytest.approx(losses, rel=1e-6), (name, execution)
            # AdamW divides by sqrt(v) + eps: where a gradient is near eps, rounding differences of
            # the two summation orders move a weight by up to ~0.2% of one lr-1e-3 step
            torch.testing.assert_close(weights0, weights, rtol=1e-5, atol=1e-5)
            assert torch.equal(weights0, weights1)  # the replicas never drift apart
        # data-parallel streaming computes the same steps as data-parallel resident
        for saved in per_rank:
            assert saved[(name, "streaming")][0] == pytest.approx(saved[(name, "resident")][0], rel=1e-6)
            torch.testing.assert_close(saved[(name, "streaming")][1], saved[(name, "resident")][1])


def test_device_gradients_are_averaged_over_ranks_and_every_group_keeps_the_runs_timeout(
    tmp_path: Path,
) -> None:
    worker = [sys.executable, str(Path(__file__).parent / "dp_worker.py"), "reduce", str(tmp_path / "out")]
    # the hang guard: rank 0 must stop on its own, long before rank 1's 120 s silence ends
    (first,) = launch([worker, worker], tmp_path, timeout=80, only_rank_0=True)
    assert first.code == 0, first.stderr
    saved = torch.load(tmp_path / "out-0.pt")
    base = torch.tensor([0.5, -1.25, 3.0, 7.5])
    for dtype in (torch.float32, torch.bfloat16):
        flat = saved[str(dtype)]
        assert flat.dtype == dtype and torch.equal(flat, (2 * base).to(dtype))  # (1x + 3x) / 2, exact
    assert "Timed out waiting 3000ms" in saved["timeout"], saved["timeout"]  # gloo, at the group's 3 s


def test_clipped_streaming_with_resident_blocks_keeps_the_replicas_equal(tmp_path: Path) -> None:
    worker = [sys.executable, str(Path(__file__).parent / "dp_worker.py"), "clip", str(tmp_path / "out")]
    for rank in launch([worker, worker], tmp_path):
        assert rank.code == 0, rank.stderr
    first, second = (torch.load(tmp_path / f"out-{r}.pt") for r in (0, 1))
    # the clip coefficient comes from the averaged gradients, the same on every rank (issue 40.4)
    assert torch.equal(first, second), (first - second).abs().max()


TWICE = "import flowrate; kw = dict(size='debug', threads=1, preheat_steps=1, steps=2, dist_timeout_s=20); [print(flowrate.benchmark('fc_mnist', **kw).distributed.world_size) for _ in range(2)]"  # noqa: E501


def test_two_benchmarks_in_one_launched_process_both_run_data_parallel(tmp_path: Path) -> None:
    # the second call must not join a group under the first one's store keys and time out (issue 40.5)
    twice = [sys.executable, "-c", TWICE]
    for rank in launch([twice, twice], tmp_path, timeout=80):
        assert rank.code == 0, rank.stderr
        assert rank.stdout.split() == ["2", "2"]


def test_measure_peak_times_each_ranks_device_alone(tmp_path: Path) -> None:
    worker = [sys.executable, str(Path(__file__).parent / "dp_worker.py"), "peak", str(tmp_path / "out")]
    for rank in launch([worker, worker], tmp_path, timeout=120):
        assert rank.code == 0, rank.stderr
    for r in (0, 1):
        saved = torch.load(tmp_path / f"out-{r}.pt")
        # a merged GEMM would sum the two ranks: a peak twice the device's (issue 40.1)
        assert saved["ranks"] == 1 and saved["flops"] > 0


def test_a_two_rank_run_sums_the_ranks_and_only_rank_0_reports(tmp_path: Path, results_store: Path) -> None:
    run = [*FLOWRATE, "run", *TINY, "--global-batch-size", "16", "--steps", "8", "--json", "-t", "dp"]
    first, second = launch([run, run], tmp_path)
    assert first.code == 0 and second.code == 0, first.stderr + second.stderr
    assert second.stdout == "" and second.stderr == ""  # rank 1 says nothing: rank 0 reports the run
    assert "data-parallel: 2 ranks" in first.stderr and "Traceback" not in first.stderr
    result = Result.from_json(first.stdout)
    d = result.distributed
    assert d is not None and d.world_size == 2 and d.backend == "gloo"
    assert [r.rank for r in d.ranks] == [0, 1]
    assert result.summary.samples_per_sec == d.ranks[0].samples_per_sec + d.ranks[1].samples_per_sec
    assert d.batch_size_per_rank == 8 and result.batch_size == 16
    assert result.summary.timed_steps == 8 and len(result.losses) == 8
    assert result.summary.timed_samples == 2 * 8 * 8
    assert result.summary.steps_per_sec == pytest.approx(result.summary.samples_per_sec / 16)
    assert d.gradient_reduction.startswith("DistributedDataParallel")
    with Store(results_store) as store:
        assert [run.result.run_id for run in store.runs()] == [result.run_id]  # recorded once


def test_a_global_batch_the_world_size_does_not_divide_is_refused(tmp_path: Path) -> None:
    run = [*FLOWRATE, "run", *TINY, "--global-batch-size", "15", "--steps", "2"]
    first, second = launch([run, run], tmp_path)
    assert first.code == second.code == 2, first.stderr + second.stderr
    assert "--global-batch-size: 15 is not divisible by the world size 2" in first.stderr
    assert "error:" not in second.stderr  # the one line comes from rank 0 (issue 14)


def test_a_configuration_that_differs_on_a_rank_is_named(tmp_path: Path) -> None:
    run = [*FLOWRATE, "run", *TINY, "--steps", "2"]
    first, second = launch([run, [*run, "--lr", "0.01"]], tmp_path)
    assert first.code == second.code == 2
    assert "error: --lr: 0.01 on rank 1 but 0.0001 on rank 0; every rank must run the same" in first.stderr
    assert "error:" not in second.stderr  # the one line comes from rank 0 (issue 14)
    assert "Traceback" not in first.stderr + second.stderr


DIES = "import os, flowrate; flowrate.benchmark('fc_mnist', size='debug', threads=1, preheat_steps=2, steps=1000, sample_every=5, dist_timeout_s={t}, on_interval=lambda record: {action})"  # noqa: E501


@pytest.mark.slow
@pytest.mark.parametrize(
    ("action", "says"),
    [
        ("os._exit(1)", "rank 1 stopped responding (its connection closed: it died or was killed"),
        (
            "__import__('time').sleep(120)",
            "rank 1 stopped responding (no answer within the 10 s --dist-timeout",
        ),
    ],
    ids=["dies", "hangs"],
)
def test_the_others_stop_with_one_line_when_a_rank_dies_or_hangs(
    tmp_path: Path, action: str, says: str
) -> None:
    # 10 s: long enough that a slow start of one rank under load is not mistaken for a hang
    run = [*FLOWRATE, "run", *TINY, "--steps", "1000", "--sample-every", "5", "--dist-timeout", "10"]
    other = [sys.executable, "-c", DIES.format(t=10, action=action)]
    # The hang guard, not a timing: rank 0 must stop on its own, before the hanging rank's 120 s
    # sleep would end it (so the guard stays under 120 s) and however slowly a loaded machine runs.
    (first,) = launch([run, other], tmp_path, timeout=100, only_rank_0=True)
    assert first.code == 1
    assert f"error: the data-parallel run stopped on rank 0: {says}" in first.stderr
    assert "Traceback" not in first.stderr


def test_scaling_reports_weak_scaling_efficiency_with_a_plot(
    run_cli, results_store: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    plot = tmp_path / "scaling.png"
    args = ["scaling", "--nproc", "1,2", *TINY, "--steps", "10", "--name", "tiny", "--out", str(plot)]
    done = run_cli(*args)
    assert done.code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "processes" in done.stdout and "efficiency" in done.stdout
    row1 = next(line for line in lines if line.strip("│ ").startswith("1 "))
    assert "100.0%" in row1
    assert any(line.strip("│ ").startswith("2 ") and "%" in line for line in lines)
    explained = next(line for line in lines if line.startswith("2 processes: predicted all-reduce overhead"))
    assert re.fullmatch(
        r"2 processes: predicted all-reduce overhead \S+ ms/step \(\S+ MB at \S+ GB/s busbw\) "
        r"vs measured \S+ ms/step",
        explained,
    )
    assert plot.exists() and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Store(results_store) as store:
        runs = store.runs()
    assert sorted(r.result.distributed.world_size for r in runs) == [1, 2]
    assert all("scaling:tiny" in r.tags for r in runs)
    done = run_cli("scaling", "--nproc", "0,2", *TINY)
    assert done.code == 2 and "--nproc" in done.stderr


def test_the_own_loop_example_runs_alone_and_on_two_ranks(tmp_path: Path) -> None:
    example = str(ROOT / "examples" / "own_loop.py")
    done = subprocess.run(
        [sys.executable, example, "--out", str(tmp_path / "one.json")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "own-mlp (resident, 1 process(es)):" in done.stdout
    alone = Result.load(tmp_path / "one.json")
    assert alone.problem.blocks == 3 and alone.summary.timed_steps == 4096 // 64 - 3
    out = str(tmp_path / "two.json")
    first, second = launch([[sys.executable, example, "--out", out]] * 2, tmp_path)
    assert first.code == 0 and second.code == 0, first.stderr + second.stderr
    assert "own-mlp (resident, 2 process(es))" in first.stdout and second.stdout == ""
    two = Result.load(out)
    assert two.distributed is not None and two.input is not None
    assert two.input.sharding == "DistributedSampler (added by flowrate)"
    assert two.summary.timed_steps == (4096 // 64 // 2) - 3  # each rank reads half the data, 3 preheat
    assert json.loads(two.to_json())["distributed"]["global_batch_size"] == 128
