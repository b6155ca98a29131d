"""Importers on small generated files: a flat uint16 token file and an image folder of PNGs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from flowrate.data.importers import import_images, import_tokens
from flowrate.data.loader import Loader, LoaderSettings
from flowrate.data.records import read_index, verify
from flowrate.errors import ConfigError, FlowrateError
from flowrate.problems.registry import get_problem


def test_token_file_becomes_consecutive_windows(tmp_path: Path) -> None:
    tokens = (np.arange(1000) % 500).astype(np.uint16)
    tokens.tofile(tmp_path / "train.bin")
    problem = get_problem("transformer", "debug")  # windows of seq_len + 1 = 33
    index = import_tokens(tmp_path / "train.bin", tmp_path / "d", problem, shards=3)
    assert index.samples == 1000 // 33 and len(index.shards) == 3
    assert index.origin["tokens"] == 1000 and index.origin["source"] == "tokens"
    assert verify(tmp_path / "d") == index.samples
    settings = LoaderSettings(batch_size=100, workers=0, shuffle=False)
    (batch,) = list(Loader(tmp_path / "d", settings, epochs=1))
    assert batch["tokens"].dtype == torch.uint16
    assert np.array_equal(batch["tokens"].numpy(), tokens[: 30 * 33].reshape(30, 33))
    inputs, targets = problem.batch_from_samples(batch, torch.Generator())
    assert torch.equal(inputs[:, 1:], targets[:, :-1])


def test_token_files_with_problems_are_refused(tmp_path: Path) -> None:
    problem = get_problem("transformer", "debug")  # vocabulary 512
    np.array([1, 2, 700, 3] * 20, dtype=np.uint16).tofile(tmp_path / "big.bin")
    with pytest.raises(
        ConfigError, match=r"token id 700 at position 2, but transformer/debug has a vocabulary of 512"
    ):
        import_tokens(tmp_path / "big.bin", tmp_path / "d", problem, shards=1)
    assert not (tmp_path / "d").exists()  # nothing half-written is left
    (tmp_path / "odd.bin").write_bytes(b"\x01\x00\x02")
    with pytest.raises(ConfigError, match="not a whole number of uint16 tokens"):
        import_tokens(tmp_path / "odd.bin", tmp_path / "d", problem)
    np.arange(10, dtype=np.uint16).tofile(tmp_path / "short.bin")
    with pytest.raises(ConfigError, match="fewer than one sample of 33"):
        import_tokens(tmp_path / "short.bin", tmp_path / "d", problem)
    with pytest.raises(ConfigError, match="not one window of token ids"):
        import_tokens(tmp_path / "short.bin", tmp_path / "d", get_problem("resnet50", "debug"))


def _image_folder(root: Path, colours: dict[str, tuple[int, int, int]], per_class: int) -> Path:
    for name, colour in colours.items():
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            Image.new("RGB", (48 + 8 * i, 40), colour).save(root / name / f"{i}.png")
    return root


def test_image_folder_becomes_labelled_images(tmp_path: Path) -> None:
    folder = _image_folder(tmp_path / "images", {"cat": (250, 10, 10), "dog": (10, 10, 250)}, per_class=5)
    problem = get_problem("resnet50", "debug")  # 3 x 32 x 32, 10 classes
    index = import_images(folder, tmp_path / "d", problem, shards=2, seed=1)
    assert index.samples == 10 and index.origin["classes"] == ["cat", "dog"]
    (batch,) = list(Loader(tmp_path / "d", LoaderSettings(batch_size=10, workers=0), epochs=1))
    images, labels = batch["images"], batch["labels"]
    assert images.shape == (10, 3, 32, 32) and images.dtype == torch.uint8
    assert sorted(labels.tolist()) == [0] * 5 + [1] * 5
    red = images[labels == 0].float().mean(dim=(0, 2, 3))
    blue = images[labels == 1].float().mean(dim=(0, 2, 3))
    assert red[0] > 240 and red[2] < 20 and blue[2] > 240 and blue[0] < 20
    shards = read_index(tmp_path / "d").shards
    assert all(len(set(s.ranges["labels"])) == 2 for s in shards)  # the seeded order mixes classes


def test_grey_images_for_a_flat_problem(tmp_path: Path) -> None:
    folder = _image_folder(tmp_path / "digits", {"0": (0, 0, 0), "1": (255, 255, 255)}, per_class=2)
    import_images(folder, tmp_path / "d", get_problem("fc_mnist", "debug"), shards=1)
    (batch,) = list(Loader(tmp_path / "d", LoaderSettings(batch_size=4, workers=0), epochs=1))
    assert batch["images"].shape == (4, 784)
    assert {int(row.float().mean()) for row in batch["images"]} == {0, 255}


def test_image_folders_with_problems_are_refused(tmp_path: Path) -> None:
    problem = get_problem("resnet50", "debug")
    (tmp_path / "flat").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "flat" / "a.png")
    with pytest.raises(ConfigError, match="has no class subfolders"):
        import_images(tmp_path / "flat", tmp_path / "d", problem)
    folder = _image_folder(tmp_path / "bad", {"a": (1, 2, 3), "b": (4, 5, 6)}, per_class=1)
    (folder / "b" / "broken.png").write_bytes(b"not a png")
    with pytest.raises(FlowrateError, match=r"cannot decode image .*broken\.png"):
        import_images(folder, tmp_path / "d", problem, shards=1)
    many = _image_folder(tmp_path / "many", {f"c{i:02d}": (i, i, i) for i in range(11)}, per_class=1)
    with pytest.raises(ConfigError, match="11 class folders, but resnet50/debug classifies 10"):
        import_images(many, tmp_path / "d", problem)
    with pytest.raises(ConfigError, match="not 8-bit images and labels"):
        import_images(many, tmp_path / "d", get_problem("transformer", "debug"))
