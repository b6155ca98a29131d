"""The on-disk dataset format: writing, reading back, checks that name the file and record, and the
zoo's round trip from synthetic batch to stored samples and back."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from data_factories import FIELDS, write_ids
from flowrate.data.make import make_dataset
from flowrate.data.records import (
    INDEX,
    DatasetError,
    check_fits,
    check_shard_files,
    read_index,
    shard_layout,
    verify,
)
from flowrate.data.writer import DatasetWriter, shard_sizes
from flowrate.errors import ConfigError
from flowrate.problems.registry import get_problem
from flowrate.problems.sample import SampleField, token_dtype


def test_shard_sizes_split_evenly() -> None:
    assert shard_sizes(10, 3) == [3, 3, 4]
    assert shard_sizes(7, 7) == [1] * 7
    for samples, shards in ((103, 7), (1, 1), (1000, 9)):
        sizes = shard_sizes(samples, shards)
        assert sum(sizes) == samples and max(sizes) - min(sizes) <= 1


def test_written_dataset_reads_back(tmp_path: Path) -> None:
    write_ids(tmp_path / "d", 23, 4)
    index = read_index(tmp_path / "d")
    assert index.samples == 23
    assert [s.records for s in index.shards] == [5, 6, 6, 6]
    assert index.fields == FIELDS
    assert index.value_range("label") == (0, 4)
    assert index.value_range("id") == (0, 22)
    assert index.offsets().tolist() == [0, 5, 11, 17, 23]
    check_shard_files(tmp_path / "d", index)
    assert verify(tmp_path / "d") == 23
    _, _, size = shard_layout(FIELDS, 5)
    assert (tmp_path / "d" / "shard-00000.bin").stat().st_size == size
    assert json.loads((tmp_path / "d" / INDEX).read_text())["origin"] == {"source": "test"}


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_flipped_byte_names_file_and_record(tmp_path: Path) -> None:
    write_ids(tmp_path / "d", 20, 2)
    offsets, _, _ = shard_layout(FIELDS, 10)
    shard = tmp_path / "d" / "shard-00001.bin"
    _flip(shard, offsets[1] + 3 * 6 + 2)  # the pixels of record 3 of the second shard
    with pytest.raises(DatasetError) as caught:
        verify(tmp_path / "d")
    message = str(caught.value)
    assert str(shard) in message and "record 3 " in message and "sample 13 " in message
    assert "\n" not in message


def test_missing_and_truncated_shards_are_named(tmp_path: Path) -> None:
    write_ids(tmp_path / "d", 20, 2)
    index = read_index(tmp_path / "d")
    shard = tmp_path / "d" / "shard-00000.bin"
    shard.write_bytes(shard.read_bytes()[:-9])
    with pytest.raises(DatasetError, match=r"shard-00000\.bin is \d+ bytes, but 10 records take"):
        check_shard_files(tmp_path / "d", index)
    shard.unlink()
    with pytest.raises(DatasetError, match=r"shard-00000\.bin is missing"):
        check_shard_files(tmp_path / "d", index)


def test_folders_that_are_not_datasets_are_refused(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        read_index(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match=r"index\.json is missing"):
        read_index(tmp_path / "empty")
    write_ids(tmp_path / "d", 4, 1)
    index = tmp_path / "d" / INDEX
    data = json.loads(index.read_text())
    index.write_text(json.dumps({**data, "version": 99}))
    with pytest.raises(DatasetError, match="version 99, newer"):
        read_index(tmp_path / "d")
    index.write_text("{not json")
    with pytest.raises(DatasetError, match="damaged"):
        read_index(tmp_path / "d")


def test_writer_refuses_bad_requests_and_leaves_nothing_half_written(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="would leave some empty"):
        DatasetWriter(tmp_path / "a", FIELDS, 3, 4, {})
    write_ids(tmp_path / "d", 4, 1)
    with pytest.raises(ConfigError, match="not an empty folder"):
        DatasetWriter(tmp_path / "d", FIELDS, 3, 1, {})
    with pytest.raises(RuntimeError), DatasetWriter(tmp_path / "b", FIELDS, 10, 2, {}) as writer:
        writer.write(
            {"id": np.arange(6), "pixels": np.zeros((6, 2, 3), np.uint8), "label": np.zeros(6, np.int64)}
        )
        raise RuntimeError("interrupted")
    assert not (tmp_path / "b").exists()


def test_check_fits_names_field_expected_and_found(tmp_path: Path) -> None:
    write_ids(tmp_path / "d", 10, 1)
    index = read_index(tmp_path / "d")
    check_fits(index, FIELDS, tmp_path / "d", "p/debug")
    other = (SampleField("tokens", (33,), "uint16", 512),)
    with pytest.raises(
        ConfigError, match=r"holds samples of id \(\) int64.*but p/debug takes tokens \(33,\) uint16"
    ):
        check_fits(index, other, tmp_path / "d", "p/debug")
    wrong_shape = (FIELDS[0], SampleField("pixels", (3, 2), "uint8"), FIELDS[2])
    with pytest.raises(
        ConfigError, match=r"field 'pixels' .* is pixels \(2, 3\) uint8, but p/debug takes pixels \(3, 2\)"
    ):
        check_fits(index, wrong_shape, tmp_path / "d", "p/debug")
    fewer_classes = (*FIELDS[:2], SampleField("label", (), "int64", 3))
    with pytest.raises(ConfigError, match=r"field 'label' .* holds values 0\.\.4, but p/debug takes 0\.\.2"):
        check_fits(index, fewer_classes, tmp_path / "d", "p/debug")


def test_token_dtype() -> None:
    assert token_dtype(50257) == "uint16"
    assert token_dtype(65536) == "uint16"
    assert token_dtype(65537) == "uint32"


@pytest.mark.parametrize("name", ["fc_mnist", "transformer", "bert-base", "resnet50"])
def test_zoo_batches_round_trip_through_stored_samples(name: str) -> None:
    problem = get_problem(name, "debug")
    cpu = torch.device("cpu")
    batch = problem.make_batch(6, cpu, torch.Generator().manual_seed(1))
    stored = problem.samples_from_batch(batch)
    spec = problem.sample_spec()
    assert list(stored) == [f.name for f in spec]
    for f in spec:
        assert tuple(stored[f.name].shape) == (6, *f.shape)
        assert stored[f.name].numpy().dtype == np.dtype(f.dtype)
    again = problem.batch_from_samples(stored, torch.Generator().manual_seed(2))
    assert [(t.shape, t.dtype) for t in again] == [(t.shape, t.dtype) for t in batch]
    if name == "transformer":
        assert all(torch.equal(a, b) for a, b in zip(again, batch, strict=True))
    elif name == "bert-base":  # the mask is redrawn; the tokens under it are the same
        assert torch.equal(problem.samples_from_batch(again)["tokens"], stored["tokens"])
    else:  # 8-bit pixels: within half a level of the normalised value
        assert torch.equal(again[1], batch[1])
        assert (again[0] - batch[0]).abs().max() <= 0.5 / 255 / 0.224 + 1e-6
    problem.loss(problem.build_model(), again)  # the model takes it


def test_kernels_and_problems_without_a_spec_refuse_datasets(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="gemm is a kernel: it runs on synthetic operands"):
        make_dataset(get_problem("gemm", "debug"), tmp_path / "g", 4, 1)


def test_make_dataset_writes_the_problem_fields(tmp_path: Path) -> None:
    index = make_dataset(get_problem("transformer", "debug"), tmp_path / "t", 50, 3, seed=3)
    assert index.samples == 50 and len(index.shards) == 3
    assert index.fields == get_problem("transformer", "debug").sample_spec()
    assert index.origin["problem"]["name"] == "transformer"
    assert verify(tmp_path / "t") == 50
