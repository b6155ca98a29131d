"""A dataset reads only its own shards: an index naming a file outside its folder (a relative path
up, an absolute path, a symlink that leads out) is refused, naming the index and the shard."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_factories import write_ids
from flowrate.data.loader import Loader, LoaderSettings
from flowrate.data.records import INDEX, DatasetError, check_shard_files, read_index, verify


def rename_shard(folder: Path, name: str) -> None:
    index = json.loads((folder / INDEX).read_text())
    index["shards"][0]["file"] = name
    (folder / INDEX).write_text(json.dumps(index))


@pytest.mark.parametrize(
    "name",
    ["../../../../etc/passwd", "/etc/passwd", "sub/shard-00000.bin", "..", ".", "", "a\\b", "x\0y"],
)
def test_an_index_naming_a_file_outside_its_folder_is_refused(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "d"
    write_ids(folder, 10, 2)
    rename_shard(folder, name)
    with pytest.raises(DatasetError) as raised:
        read_index(folder)
    message = str(raised.value)
    assert str(folder / INDEX) in message and repr(name) in message
    assert "\n" not in message


def test_a_symlinked_shard_leading_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    write_ids(folder, 10, 2)
    outside = tmp_path / "elsewhere.bin"
    (folder / "shard-00000.bin").rename(outside)
    (folder / "shard-00000.bin").symlink_to(outside)
    index = read_index(folder)  # the name itself is plain
    for check in (lambda: check_shard_files(folder, index), lambda: verify(folder)):
        with pytest.raises(DatasetError, match=r"names shard 'shard-00000.bin', which leads out of"):
            check()
    with pytest.raises(DatasetError, match="leads out of the dataset's folder"):
        Loader(folder, LoaderSettings(batch_size=2, workers=0), rank=0, world_size=1)


def test_a_symlink_inside_the_folder_and_a_symlinked_folder_still_read(tmp_path: Path) -> None:
    real = tmp_path / "real"
    write_ids(real, 10, 2)
    (real / "shard-00000.bin").rename(real / "kept.bin")
    (real / "shard-00000.bin").symlink_to("kept.bin")
    linked = tmp_path / "linked"
    linked.symlink_to(real)
    assert verify(linked) == 10


def test_a_symlink_loop_is_one_dataset_error(tmp_path: Path) -> None:
    folder = tmp_path / "d"
    write_ids(folder, 10, 2)
    (folder / "shard-00000.bin").unlink()
    (folder / "shard-00000.bin").symlink_to(folder / "loop.bin")
    (folder / "loop.bin").symlink_to(folder / "shard-00000.bin")
    with pytest.raises(DatasetError, match=r"shard-00000\.bin"):
        check_shard_files(folder, read_index(folder))
