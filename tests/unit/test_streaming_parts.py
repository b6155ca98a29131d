"""The parts of weight streaming a CPU can check on their own: the host updater never loses an
error and leaves a core to the launching thread; copies in flight are limited; the CUDA events
of step timing are read every step, not kept until the end; the pinned arena is counted as the
allocator really takes it; each block travels in one copy per direction."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from flowrate.config import Mode, OptimizerName, Precision
from flowrate.execution import host_memory, step_times
from flowrate.execution.host_memory import HostArena, may_pin, pinned_size
from flowrate.execution.host_optimizer import BlockUpdater, updater_threads
from flowrate.execution.precision import PrecisionPolicy
from flowrate.execution.step_times import StepTimeline
from flowrate.execution.stream_copies import Copier, CopyLimiter
from flowrate.execution.streaming import StreamingExecutor
from flowrate.problems.base import Batch, Problem


def test_an_update_error_is_raised_even_when_a_later_update_of_the_block_was_queued() -> None:
    updater = BlockUpdater(threads=1)
    ran: list[str] = []

    def fails() -> None:
        ran.append("first")
        raise RuntimeError("the first update failed")

    updater.submit(3, fails)
    updater.submit(3, lambda: ran.append("second"))  # used to replace the first one's future
    with pytest.raises(RuntimeError, match="the first update failed"):
        updater.wait(3)
    assert ran == ["first", "second"]  # the queue went on; the error was kept for the waiter
    updater.wait(3)  # nothing left: the error was raised once
    updater.submit(1, fails)
    with pytest.raises(RuntimeError, match="the first update failed"):
        updater.wait_all()
    updater.close()


def test_the_updater_leaves_one_thread_to_the_launching_thread_until_it_closes() -> None:
    assert updater_threads(16) == 15 and updater_threads(2) == 1 and updater_threads(1) == 1
    before = torch.get_num_threads()
    updater = BlockUpdater(threads=1)
    seen: list[int] = []
    updater.submit(0, lambda: seen.append(torch.get_num_threads()))
    updater.wait_all()
    updater.close()
    assert seen == [1] and torch.get_num_threads() == before


class FakeEvent:
    """A copy that completes when waited for; counts the waits."""

    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def synchronize(self) -> None:
        self.log.append(self.name)

    def elapsed_time(self, end: FakeEvent) -> float:
        return 2.0  # ms

    def record(self, *_: object) -> None:
        pass


def test_at_most_two_copies_are_in_flight() -> None:
    waited: list[str] = []
    limiter = CopyLimiter(depth=2)
    for block in range(5):
        limiter.admit()
        assert limiter.in_flight < 2
        limiter.issued(FakeEvent(waited, f"copy {block}"))
    assert limiter.in_flight == 2
    assert waited == ["copy 0", "copy 1", "copy 2"]  # each new copy waited for the oldest
    assert limiter.waits == 3


def test_step_events_are_read_every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[str] = []
    monkeypatch.setattr(step_times, "cuda_event", lambda: FakeEvent(log, "event"))
    timeline = StepTimeline()
    for _ in range(50):
        timeline.begin()
        for _ in range(24):  # a copy in per block
            timeline.events("copy_in")
        timeline.end()
        assert timeline.pending_events <= 2 * 24  # this step's and the one before's, never more
    medians = timeline.medians()
    assert timeline.pending_events == 0
    assert medians["copy_in_s"] == pytest.approx(24 * 2.0 / 1000)


def test_a_pinned_arena_counts_what_the_allocator_really_takes() -> None:
    assert [pinned_size(n) for n in (1, 64, 65, 70_000_000)] == [1, 64, 128, 1 << 27]
    arena = HostArena()
    views = [arena.reserve(3, torch.float32), arena.reserve(5, torch.bfloat16)]
    assert views[1][0] == 64  # every view starts on a cache line
    assert arena.allocate(pin=False) is None
    assert arena.nbytes == 64 + 10 and not arena.pinned
    first, second = (arena.view(v) for v in views)
    first.fill_(1.0)
    second.fill_(2.0)
    assert first.dtype == torch.float32 and second.dtype == torch.bfloat16
    assert first.untyped_storage().data_ptr() == second.untyped_storage().data_ptr()  # one allocation
    arena.pinned = True  # as after a pinned allocation: counted the allocator's way
    assert arena.nbytes == 128


class Chain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 8)) for _ in range(4)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class ChainProblem(Problem):
    name = "chain"

    def build_model(self) -> nn.Module:
        return Chain()

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        return (torch.randn(batch_size, 8, generator=generator),)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        return model(batch[0]).square().mean()

    def parameter_count(self) -> int:
        return 4 * (16 + 72)

    def forward_flops_per_sample(self) -> int:
        return 4 * 128


def test_one_copy_per_block_and_direction_and_the_backward_restream_is_the_only_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    copies: list[tuple[str, int]] = []
    real_in, real_out = Copier.copy_in, Copier.copy_out
    monkeypatch.setattr(
        Copier, "copy_in", lambda self, b, p: copies.append(("in", id(b))) or real_in(self, b, p)
    )
    monkeypatch.setattr(
        Copier, "copy_out", lambda self, b, p: copies.append(("out", id(b))) or real_out(self, b, p)
    )
    problem = ChainProblem()
    executor = StreamingExecutor(
        problem,
        problem.build_model(),
        PrecisionPolicy(Precision.BF16, torch.device("cpu")),
        Mode.TRAIN,
        OptimizerName.ADAMW,
        1e-3,
    )
    ids = {id(b.buffers): b.index for b in executor.blocks}
    assert all(len(b.groups) == 2 for b in executor.blocks)  # bf16 weights, fp32 norms and biases
    batch = problem.make_batch(2, torch.device("cpu"), torch.Generator().manual_seed(0))
    for _ in range(2):
        copies.clear()
        executor.step(batch)
        # forward: every block once; backward: every block but the last (kept) again, last first;
        # each block's gradients leave once, last block first
        assert [(d, ids[b]) for d, b in copies if d == "in"] == [("in", i) for i in (0, 1, 2, 3, 2, 1, 0)]
        assert [ids[b] for d, b in copies if d == "out"] == [3, 2, 1, 0]
    executor.finish()


def test_an_arena_is_pinned_only_when_the_rounding_leaves_room_for_the_blocks_still_to_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert may_pin(65, 100, 228) and not may_pin(65, 101, 228)  # 65 pinned takes 128
    pins: list[bool] = []
    real_allocate = HostArena.allocate

    def allocate(self: HostArena, pin: bool) -> str | None:
        pins.append(pin)
        return real_allocate(self, False)  # a CPU build cannot page-lock; the decision is the test

    monkeypatch.setattr(HostArena, "allocate", allocate)
    monkeypatch.setattr(StreamingExecutor, "_pins_host_memory", lambda self: True)
    problem = ChainProblem()

    def placed(available: int) -> StreamingExecutor:
        monkeypatch.setattr(
            host_memory.psutil, "virtual_memory", lambda: type("M", (), {"available": available})
        )
        pins.clear()
        policy = PrecisionPolicy(Precision.BF16, torch.device("cpu"))
        return StreamingExecutor(
            problem, problem.build_model(), policy, Mode.TRAIN, OptimizerName.ADAMW, 1e-3
        )

    roomy = placed(1 << 40)
    assert pins == [True] * 4 and not any("pageable" in w for w in roomy.warnings)
    size = roomy.blocks[0].arena.requested  # the four blocks are alike
    assert pinned_size(size) > size
    # room for one rounded arena and one more plain one: the first two blocks would leave the
    # later ones short, so they stay pageable; the last two are pinned
    tight = placed(pinned_size(size) + size)
    assert pins == [False, False, True, True]
    assert "2 of 4 streamed blocks keep their host memory pageable" in " ".join(tight.warnings)


def test_gpt2s_conv1d_weights_travel_in_the_compute_dtype_as_autocast_runs_them() -> None:
    from transformers.pytorch_utils import Conv1D

    from flowrate.execution.flat_params import cast_by_autocast

    model = nn.Sequential(Conv1D(24, 8), nn.LayerNorm(24), nn.Linear(24, 8))
    assert cast_by_autocast(model) == {id(model[0].weight), id(model[2].weight)}
    with torch.autocast("cpu", dtype=torch.bfloat16):  # what makes it right: addmm runs in bf16
        assert model[0](torch.randn(2, 8)).dtype == torch.bfloat16
