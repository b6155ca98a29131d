"""DataParallel's process groups (a real single-process gloo world) and the device rule."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist

from flowrate.errors import ConfigError, FlowrateError
from flowrate.execution.distributed import DataParallel
from flowrate.execution.launch import Launch, check_device_for_launch, launched, rank_device


@pytest.fixture
def one_rank_world(request: pytest.FixtureRequest) -> Iterator[None]:
    """A real world of one process; the backend string is the test's parameter."""
    dist.init_process_group(
        request.param, store=dist.HashStore(), rank=0, world_size=1, timeout=dt.timedelta(seconds=20)
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


def groups() -> set[object]:
    return set(dist.distributed_c10d._world.pg_map)


# "cpu:gloo" is a default group that is not plain gloo, as an NCCL one is: DataParallel then makes
# every group it can make (the host's, the gradients'), each on the CPU here
@pytest.mark.parametrize(
    ("one_rank_world", "made"), [("gloo", 1), ("cpu:gloo", 2)], indirect=["one_rank_world"]
)
def test_every_group_data_parallel_makes_has_the_runs_timeout(one_rank_world: None, made: int) -> None:
    before = groups()
    DataParallel(0, 1, 0, torch.device("cpu"), timeout_s=7.0, owns_group=False)
    new = groups() - before
    assert len(new) == made
    for group in new:
        backend = group._get_backend(torch.device("cpu"))  # type: ignore[attr-defined]
        assert backend.options._timeout == dt.timedelta(seconds=7)  # not new_group's 30 minutes


@pytest.mark.parametrize("one_rank_world", ["gloo"], indirect=True)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_device_gradients_are_averaged_in_place_in_their_dtype(
    one_rank_world: None, dtype: torch.dtype
) -> None:
    dp = DataParallel(0, 1, 0, torch.device("cpu"), timeout_s=7.0, owns_group=False)
    flat = torch.tensor([0.5, -1.25, 3.0], dtype=dtype)
    storage = flat.untyped_storage().data_ptr()
    dp.average_device_gradients(flat)
    assert flat.dtype == dtype and flat.untyped_storage().data_ptr() == storage
    assert flat.tolist() == [0.5, -1.25, 3.0]  # the mean over one rank


@pytest.mark.gpu
@pytest.mark.parametrize("one_rank_world", ["nccl"], indirect=True)
def test_on_nccl_device_gradients_are_averaged_on_the_gpu_in_bf16(one_rank_world: None) -> None:
    dp = DataParallel(0, 1, 0, torch.device("cuda", 0), timeout_s=7.0, owns_group=False)
    flat = torch.tensor([0.5, -1.25, 3.0], dtype=torch.bfloat16, device="cuda")
    dp.average_device_gradients(flat)
    assert flat.dtype == torch.bfloat16 and flat.is_cuda and flat.tolist() == [0.5, -1.25, 3.0]


GPUS_PER_NODE = Launch(rank=5, world_size=8, local_rank=1, local_world_size=4)


def test_joining_a_launch_refuses_the_shared_gpu_before_any_group(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)  # a node with 4 GPUs, faked
    with pytest.raises(ConfigError, match="cuda:0 would put every rank of this node on one GPU"):
        DataParallel.start(GPUS_PER_NODE, "cuda:0", 5.0)
    assert not dist.is_initialized()


def test_an_explicit_gpu_index_under_torchrun_is_refused_where_ranks_would_share_it() -> None:
    with pytest.raises(ConfigError) as refused:
        check_device_for_launch("cuda:0", GPUS_PER_NODE, visible_gpus=4)
    assert str(refused.value) == (
        "device: cuda:0 would put every rank of this node on one GPU: pass --device cuda, and rank r "
        "of a node uses cuda:LOCAL_RANK"
    )
    # without LOCAL_WORLD_SIZE (a launcher other than torchrun) ranks may share the node: refused
    with pytest.raises(ConfigError):
        check_device_for_launch("cuda:1", Launch(1, 2, 1), visible_gpus=2)


@pytest.mark.parametrize(
    ("name", "launch", "visible"),
    [
        ("cuda", GPUS_PER_NODE, 4),  # each rank takes cuda:LOCAL_RANK
        ("auto", GPUS_PER_NODE, 4),
        ("cpu", GPUS_PER_NODE, 0),
        ("cuda:0", GPUS_PER_NODE, 1),  # CUDA_VISIBLE_DEVICES per rank: cuda:0 is this rank's own
        ("cuda:2", Launch(3, 4, 0, local_world_size=1), 8),  # one rank per node
    ],
)
def test_a_device_that_cannot_collide_is_accepted(name: str, launch: Launch, visible: int) -> None:
    check_device_for_launch(name, launch, visible_gpus=visible)


def test_launched_reads_the_local_world_size() -> None:
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "1"}
    assert launched(env) == Launch(3, 4, 1, None)
    assert launched({**env, "LOCAL_WORLD_SIZE": "2"}) == Launch(3, 4, 1, 2)
    with pytest.raises(FlowrateError, match="LOCAL_WORLD_SIZE must be integers"):
        launched({**env, "LOCAL_WORLD_SIZE": "two"})


@pytest.mark.parametrize("name", ["auto", "cuda"])
def test_one_visible_gpu_per_rank_is_each_ranks_own_whatever_its_local_rank(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # CUDA_VISIBLE_DEVICES set per rank: LOCAL_RANK 1 sees one GPU, its own, as cuda:0
    chosen: list[torch.device] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    assert rank_device(name, 1) == torch.device("cuda", 0) and chosen == [torch.device("cuda", 0)]


def test_a_local_rank_past_several_visible_gpus_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(ConfigError, match="LOCAL_RANK 2 needs a CUDA device but only 2 are visible"):
        rank_device("cuda", 2)
