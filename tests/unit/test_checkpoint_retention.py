"""--keep-checkpoints N: after each save, only the newest N checkpoints stay in the folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

import flowrate
from flowrate.config import RunConfig
from flowrate.errors import ConfigError
from flowrate.execution.checkpoint import prune_checkpoints, save_checkpoint


def touch(folder: Path, step: int, mtime_s: int) -> Path:
    path = folder / f"step-{step:08d}.pt"
    path.write_bytes(b"x")
    os.utime(path, ns=(mtime_s * 10**9, mtime_s * 10**9))
    return path


def test_the_newest_by_time_stay_and_other_files_are_not_touched(tmp_path: Path) -> None:
    # an earlier run left steps 100 and 200; this run saves 4, 8, 12: the earlier run's are older
    earlier = [touch(tmp_path, 100, 1000), touch(tmp_path, 200, 1001)]
    ours = [touch(tmp_path, step, 2000 + step) for step in (4, 8, 12)]
    (tmp_path / "notes.txt").write_text("the user's")
    (tmp_path / "step-7.pt").write_bytes(b"not a name flowrate writes")
    deleted = prune_checkpoints(tmp_path, 2, saved=ours[-1])
    assert deleted == [*earlier, ours[0]]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "notes.txt", "step-00000008.pt", "step-00000012.pt", "step-7.pt",
    ]  # fmt: skip


def test_the_checkpoint_just_saved_stays_whatever_the_clock_says(tmp_path: Path) -> None:
    newer = touch(tmp_path, 8, 5000)  # a clock that stepped back: the file just saved looks older
    saved = touch(tmp_path, 12, 4000)
    assert prune_checkpoints(tmp_path, 1, saved=saved) == [newer]
    assert [p.name for p in tmp_path.iterdir()] == [saved.name]
    assert prune_checkpoints(tmp_path, 3) == []  # fewer than N: nothing to delete


def test_a_saved_checkpoint_is_loadable_after_pruning(tmp_path: Path) -> None:
    model = torch.nn.Linear(2, 2)
    for step in (1, 2, 3):
        saved = save_checkpoint(tmp_path, step, model, None)
        prune_checkpoints(tmp_path, 2, saved)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000002.pt", "step-00000003.pt"]
    assert torch.load(tmp_path / "step-00000003.pt", weights_only=True)["step"] == 3


def test_keep_needs_a_checkpoint_folder_and_a_positive_count() -> None:
    with pytest.raises(ConfigError) as caught:
        RunConfig(keep_checkpoints=2)
    assert caught.value.field == "keep_checkpoints" and "--checkpoint-dir" in caught.value.message
    with pytest.raises(ConfigError) as caught:
        RunConfig(checkpoint_every=2, checkpoint_dir="ck", keep_checkpoints=0)
    assert caught.value.field == "keep_checkpoints"
    assert RunConfig(checkpoint_every=2, checkpoint_dir="ck", keep_checkpoints=1).keep_checkpoints == 1


def test_a_run_keeps_the_newest_n(tmp_path: Path) -> None:
    folder = tmp_path / "ck"
    result = flowrate.benchmark(
        "fc_mnist",
        size="debug",
        device="cpu",
        steps=12,
        preheat_steps=1,
        sample_every=2,
        checkpoint_every=2,
        checkpoint_dir=str(folder),
        keep_checkpoints=2,
    )
    assert result.summary.checkpoints == 5  # every save (after steps 2 … 10) was made and timed
    assert sorted(p.name for p in folder.iterdir()) == ["step-00000008.pt", "step-00000010.pt"]


def test_the_cli_flag_is_read_and_bounded(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    args = ("run", "-p", "fc_mnist", "--size", "debug", "--device", "cpu", "--steps", "4", "--preheat", "1")
    folder = tmp_path / "ck"
    ok = run_cli(*args, "--checkpoint-every", "1", "--checkpoint-dir", str(folder), "--keep-checkpoints", "1")
    assert ok.code == 0, ok.stderr
    assert [p.name for p in folder.iterdir()] == ["step-00000003.pt"]  # saved after steps 1, 2, 3
    zero = run_cli(
        *args, "--checkpoint-every", "1", "--checkpoint-dir", str(folder), "--keep-checkpoints", "0"
    )
    assert zero.code == 2 and "--keep-checkpoints" in zero.stderr and "Traceback" not in zero.stderr
    alone = run_cli(*args, "--keep-checkpoints", "3")
    assert alone.code == 2
    assert (
        "error: --keep-checkpoints: applies with --checkpoint-every and --checkpoint-dir only" in alone.stderr
    )
