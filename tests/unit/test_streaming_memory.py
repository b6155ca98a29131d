"""Weight streaming's memory bound, read from the real storages through the public session API:
at every block's forward and backward, the bytes held by the storages of the model's parameters
and of the tensors autograd saved stay within two blocks' weights plus the activations; between
steps no weight is held. Not the executor's own accounting: the storages themselves."""

from __future__ import annotations

import weakref
from collections.abc import Callable

import pytest
import torch
from torch import nn

import flowrate

BLOCKS, WIDTH, BATCH = 8, 1024, 4
BLOCK_BYTES = WIDTH * WIDTH * 4  # one fp32 Linear(1024, 1024) without bias: 4 MiB
# everything autograd saves that is not a weight, for the whole model at this batch: each block
# keeps its input (16 KiB) and its tanh output (16 KiB); 1 MiB is four times that
ACTIVATIONS = 1 << 20


class Layer(nn.Module):
    def __init__(self, probe: Callable[[str], None]) -> None:
        super().__init__()
        self.linear = nn.Linear(WIDTH, WIDTH, bias=False)
        self.probe = probe

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.linear(x)
        self.probe("forward")
        if z.requires_grad:  # runs inside this block's backward, once the block's weights are back
            z.register_hook(lambda grad: self.probe("backward"))
        return torch.tanh(z)


class Stack(nn.Module):
    def __init__(self, probe: Callable[[str], None]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Layer(probe) for _ in range(BLOCKS)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class Storages:
    """Bytes held by the storages of the model's parameters and of every tensor autograd saved
    (each storage once), read when probed."""

    def __init__(self) -> None:
        self.model: nn.Module | None = None
        self.saved: list[weakref.ref[torch.Tensor]] = []
        self.readings: dict[str, list[int]] = {"forward": [], "backward": []}

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        self.saved.append(weakref.ref(tensor))
        return tensor

    def held(self, weights_only: bool = False) -> int:
        assert self.model is not None
        tensors = list(self.model.parameters())
        if not weights_only:
            tensors += [t for t in (ref() for ref in self.saved) if t is not None]
        storages = {}
        for tensor in tensors:
            storage = tensor.untyped_storage()
            if storage.nbytes():
                storages[storage.data_ptr()] = storage.nbytes()
        return sum(storages.values())

    def probe(self, where: str) -> None:
        self.readings[where].append(self.held())


def train(storages: Storages, steps: int = 3) -> list[int]:
    """A user's loop under a streaming session; the weight bytes held after every step."""
    torch.manual_seed(0)
    between = []
    batches = [torch.randn(BATCH, WIDTH) for _ in range(steps + 1)]
    with flowrate.session(
        "memory-bound", execution="streaming", device="cpu", preheat_steps=1, steps=steps, store=False
    ) as s:
        model = s.model(Stack(storages.probe))
        storages.model = model
        s.optimizer(torch.optim.AdamW(model.parameters(), lr=1e-3))
        for x in s.loader(batches):
            with torch.autograd.graph.saved_tensors_hooks(storages.pack, lambda t: t):
                loss = model(x).square().mean()
            s.step(loss)
            between.append(storages.held(weights_only=True))
    return between


def test_streaming_holds_two_blocks_of_weights_and_none_between_steps() -> None:
    storages = Storages()
    between = train(storages)
    assert len(storages.readings["forward"]) == len(storages.readings["backward"]) == BLOCKS * len(between)
    for where, readings in storages.readings.items():
        assert max(readings) <= 2 * BLOCK_BYTES + ACTIVATIONS, where
        assert min(readings) >= BLOCK_BYTES, where  # the running block's weights are really there
    assert between == [0] * len(between)


@pytest.mark.gpu
def test_on_cuda_the_device_holds_two_blocks_of_weights_and_gradients() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    device = torch.device("cuda")
    torch.manual_seed(0)
    batches = [torch.randn(BATCH, WIDTH) for _ in range(4)]
    with flowrate.session(
        "memory-bound-cuda", execution="streaming", device="cuda", preheat_steps=1, steps=3, store=False
    ) as s:
        model = s.model(Stack(lambda where: None))
        s.optimizer(torch.optim.AdamW(model.parameters(), lr=1e-3))
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        for x in s.loader(batches):
            s.step(model(x).square().mean())
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device) - base
    # two blocks' weights; the weight gradient autograd makes and its place in the block's flat
    # gradient; the block before's flat gradient on its way out; activations
    assert peak <= 5 * BLOCK_BYTES + ACTIVATIONS, peak
