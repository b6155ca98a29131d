"""The loader: exactly-once coverage over workers x ranks x epochs, determinism, full batches in an
endless stream, errors that name what is wrong, and the input analyzer's known answer."""

from __future__ import annotations

import collections
import functools
import itertools
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from data_factories import FIELDS, write_ids
from flowrate.data import loader as loader_module
from flowrate.data.loader import Loader, LoaderSettings, ShardStream, worker_shards
from flowrate.data.records import DatasetError, read_index, shard_layout
from flowrate.errors import ConfigError
from flowrate.harness import analyze_input as analyzer
from flowrate.harness.analyze_input import analyze_input, candidates, predicted_share, worker_counts

SAMPLES = 103  # over 7 shards of 14 or 15: nothing divides evenly


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("loader") / "d"
    write_ids(folder, SAMPLES, 7)
    return folder


def stream(
    folder: Path, rank: int = 0, world: int = 1, epochs: int | None = 1, first: int = 0, **settings: object
) -> ShardStream:
    options = {"batch_size": 8, "shuffle_buffer": 16, "seed": 5, **settings}
    return ShardStream(folder, read_index(folder), LoaderSettings(**options), rank, world, epochs, first)  # type: ignore[arg-type]


def ids_of(batches: object) -> list[int]:
    return [int(i) for batch in batches for i in batch["id"]]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("world", "workers"), [(1, 1), (1, 3), (2, 1), (2, 3), (3, 2)])
def test_every_sample_exactly_once_per_epoch_across_workers_and_ranks(
    dataset: Path, world: int, workers: int
) -> None:
    for epoch in range(3):
        seen: list[int] = []
        per_rank = []
        for rank in range(world):
            rank_ids = []
            for worker in range(workers):
                rank_ids += ids_of(stream(dataset, rank, world, first=epoch).batches(worker, workers))
            per_rank.append(len(rank_ids))
            seen += rank_ids
        assert sorted(seen) == list(range(SAMPLES)), (world, workers, epoch)
        shards = sorted({len(worker_shards(7, epoch, 5, True, r, world, 0, 1)) for r in range(world)})
        assert shards in ([7 // world], [7 // world, -(-7 // world)])  # ⌊K/R⌋ or ⌈K/R⌉ whole shards
        assert max(per_rank) - min(per_rank) <= 15 + -(-7 // world)  # about one shard's worth apart


def test_shard_assignment_partitions_each_epoch() -> None:
    for epoch in range(4):
        owners = [
            int(s)
            for rank, worker in itertools.product(range(2), range(3))
            for s in worker_shards(12, epoch, 1, True, rank, 2, worker, 3)
        ]
        assert sorted(owners) == list(range(12))
    assert (
        worker_shards(12, 0, 1, True, 0, 2, 0, 3).tolist()
        != worker_shards(12, 1, 1, True, 0, 2, 0, 3).tolist()
    )
    assert worker_shards(6, 0, 1, False, 1, 2, 0, 1).tolist() == [1, 3, 5]


def test_batches_carry_the_records_they_name(dataset: Path) -> None:
    for batch in stream(dataset).batches(0, 1):
        ids = batch["id"].numpy()
        assert batch["pixels"].dtype == torch.uint8 and batch["id"].dtype == torch.int64
        assert np.array_equal(batch["pixels"].numpy()[:, 0, 0], (ids % 256).astype(np.uint8))
        assert np.array_equal(batch["label"].numpy(), ids % 5)


def test_the_same_seed_gives_the_same_batches_and_epochs_differ(dataset: Path) -> None:
    first = [b["id"].tolist() for b in stream(dataset, epochs=2).batches(0, 2)]
    again = [b["id"].tolist() for b in stream(dataset, epochs=2).batches(0, 2)]
    other_seed = [b["id"].tolist() for b in stream(dataset, epochs=2, seed=6).batches(0, 2)]
    assert first == again
    assert first != other_seed
    epoch_0 = ids_of(stream(dataset, first=0).batches(0, 1))
    epoch_1 = ids_of(stream(dataset, first=1).batches(0, 1))
    assert epoch_0 != epoch_1 and sorted(epoch_0) == sorted(epoch_1)
    assert epoch_0 != sorted(epoch_0)  # shuffled
    assert ids_of(stream(dataset, shuffle=False).batches(0, 1)) == list(range(SAMPLES))


def test_an_endless_stream_has_full_batches_across_epoch_ends(dataset: Path) -> None:
    batches = stream(dataset, epochs=None).batches(0, 1)
    taken = list(itertools.islice(batches, SAMPLES))  # 8 epochs of 103 samples in 103 batches of 8
    assert all(len(b["id"]) == 8 for b in taken)
    counts = collections.Counter(ids_of(taken))
    assert set(counts.values()) == {8} and len(counts) == SAMPLES
    finite = list(stream(dataset, epochs=1).batches(0, 1))
    assert len(finite[-1]["id"]) == SAMPLES % 8  # a finite stream ends with its short batch
    assert len(list(stream(dataset, epochs=1, drop_last=True).batches(0, 1))) == SAMPLES // 8


def test_dataloader_workers_cover_every_sample_per_epoch(dataset: Path) -> None:
    loader = Loader(dataset, LoaderSettings(batch_size=8, workers=2, seed=1), epochs=2, rank=1, world_size=2)
    mine = ids_of(loader)
    other = ids_of(
        Loader(dataset, LoaderSettings(batch_size=8, workers=0, seed=1), epochs=2, rank=0, world_size=2)
    )
    counts = collections.Counter(mine + other)
    assert set(counts.values()) == {2} and len(counts) == SAMPLES
    assert (
        ids_of(
            Loader(dataset, LoaderSettings(batch_size=8, workers=2, seed=1), epochs=2, rank=1, world_size=2)
        )
        == mine
    )


def test_more_workers_than_shards_is_refused_with_the_numbers(dataset: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"7 shard\(s\), but 2 ranks x 4 loader worker\(s\) need at least 8"
    ) as caught:
        Loader(dataset, LoaderSettings(batch_size=8, workers=4), rank=0, world_size=2)
    assert caught.value.field == "loader_workers" and "--loader-workers 3" in caught.value.message
    with pytest.raises(ConfigError, match="rank: must be in"):
        Loader(dataset, LoaderSettings(batch_size=8, workers=1), rank=2, world_size=2)
    with pytest.raises(ConfigError, match="loader_workers: must be 0 or more"):
        LoaderSettings(batch_size=8, workers=-1)


def test_a_corrupt_record_read_by_a_worker_is_one_line_naming_file_and_record(tmp_path: Path) -> None:
    write_ids(tmp_path / "d", 20, 2)
    offsets, _, _ = shard_layout(FIELDS, 10)
    shard = tmp_path / "d" / "shard-00000.bin"
    data = bytearray(shard.read_bytes())
    data[offsets[2] + 8 * 7] ^= 0x01  # the label of record 7
    shard.write_bytes(bytes(data))
    for workers in (0, 1):
        with pytest.raises(DatasetError) as caught:
            ids_of(Loader(tmp_path / "d", LoaderSettings(batch_size=4, workers=workers), epochs=1))
        message = str(caught.value)
        assert f"shard {shard} is corrupt: record 7 (sample 7 of the dataset)" in message
        assert "\n" not in message and "Traceback" not in message


def test_predicted_share_models_concurrent_workers_and_a_serial_reader() -> None:
    assert predicted_share(1000, 500, workers=2) == 0.0
    assert predicted_share(400, 500, workers=1) == pytest.approx(0.2)
    assert predicted_share(500, 500, workers=0) == pytest.approx(0.5)  # read, then compute
    assert predicted_share(0, 500, workers=1) == 1.0
    assert (
        worker_counts(0) == [0]
        and worker_counts(6) == [0, 1, 2, 4, 6]
        and worker_counts(8) == [0, 1, 2, 4, 8]
    )
    assert candidates(2, (2, 4)) == [(0, None), (1, 2), (1, 4), (2, 2), (2, 4)]


class FakeTime:
    """A clock that moves only when the reader sleeps: the loader's ``time`` module, and the clock
    measure_pipeline reads."""

    def __init__(self) -> None:
        self.now = 0.0
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1  # a clock nothing advances would keep measure_pipeline waiting for ever
        assert self.reads < 1000, "the fake clock does not move: does the reader still sleep?"
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_known_cost_pipeline_is_timed_exactly(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """1/256 s of work per sample, read in this process (0 workers), on a clock that only the reads
    advance: 256 samples/s exactly. A model consuming 2048 samples/s is 8 times short of it."""
    clock = FakeTime()
    monkeypatch.setattr(loader_module, "time", clock)
    monkeypatch.setattr(
        analyzer, "measure_pipeline", functools.partial(analyzer.measure_pipeline, clock=clock)
    )
    settings = LoaderSettings(batch_size=4, sample_cost_s=1 / 256)  # a batch takes 1/64 s
    index, cpu = read_index(dataset), torch.device("cpu")
    starved = analyze_input(
        dataset, index, settings, cpu, 2048.0, "given", configurations=[(0, None)], seconds=0.25
    )
    (point,) = starved.points
    # at least 8 batches, then until 0.25 s have passed: 16 batches of 4 in 0.25 s
    assert (point.samples_per_sec, point.batches, point.seconds) == (256.0, 16, 0.25)
    assert point.predicted_share == 2048 / (2048 + 256)  # the step reads, then computes
    assert starved.recommended is None and starved.best is point and starved.shortfall == 8.0


def test_analyzer_recommends_the_known_answer(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One reader delivers 256 samples/s, two 512. A model consuming 300 samples/s needs two
    workers; one consuming 2048 cannot be fed by two, 4x short. The pipeline's rates are given
    here, so the analyzer's arithmetic and choice are what is tested; that workers really read
    concurrently is wall-clock timing, measured by benchmarks/input_analyzer.py."""
    delivered = {0: 256.0, 1: 256.0, 2: 512.0}
    asked: list[tuple[int, int, float]] = []

    def pipeline(
        directory: Path, settings: LoaderSettings, device: torch.device, *, seconds: float, index: object
    ) -> tuple[float, int, float]:
        asked.append((settings.workers, settings.prefetch, seconds))
        return delivered[settings.workers], 10, seconds

    monkeypatch.setattr(analyzer, "measure_pipeline", pipeline)
    settings = LoaderSettings(batch_size=4, prefetch=3)
    configurations = [(0, None), (1, 2), (2, 2)]
    index = read_index(dataset)
    cpu = torch.device("cpu")
    fed = analyze_input(
        dataset, index, settings, cpu, 300.0, "given", configurations=configurations, seconds=0.25
    )
    assert asked == [(0, 3, 0.25), (1, 2, 0.25), (2, 2, 0.25)]  # no prefetch given: the settings'
    assert [p.samples_per_sec for p in fed.points] == [256.0, 256.0, 512.0]
    assert fed.points[0].predicted_share == 300 / (300 + 256)
    assert fed.points[1].predicted_share == 1 - 256 / 300
    assert fed.recommended is fed.points[2] and fed.points[2].predicted_share == 0.0
    assert fed.shortfall is None
    starved = analyze_input(
        dataset, index, settings, cpu, 2048.0, "given", configurations=configurations[2:], seconds=0.25
    )
    assert starved.recommended is None
    assert starved.shortfall == 4.0
    assert starved.to_dict()["shortfall"] == starved.shortfall


def test_each_record_is_checked_once_per_process(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[int] = []
    monkeypatch.setattr(
        loader_module, "check_record", lambda shard, record, values, sample: checked.append(sample)
    )
    assert len(ids_of(stream(dataset, epochs=3).batches(0, 1))) == 3 * SAMPLES
    assert sorted(checked) == list(range(SAMPLES))


def test_a_worker_drops_a_broken_hand_over_and_passes_any_other_error_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # what multiprocessing's resource_sharer thread reports when the main process went away
    # mid-fetch (Ctrl-C, SIGTERM), and what it would report of anything else
    seen: list[type[BaseException]] = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, value, traceback: seen.append(kind))
    loader_module.hand_over_quietly(0)
    for error in (BrokenPipeError(), ConnectionResetError(), EOFError(), KeyError("key"), ValueError()):
        sys.excepthook(type(error), error, None)
    assert seen == [KeyError, ValueError]


def test_the_loaders_workers_start_with_the_quiet_hand_over(dataset: Path) -> None:
    loader = Loader(dataset, LoaderSettings(batch_size=8, workers=1), epochs=1)
    next(iter(loader))
    assert getattr(loader._iterator, "_worker_init_fn", None) is loader_module.hand_over_quietly
    loader.close()
