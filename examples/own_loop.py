"""Measure your own training loop: an ordinary PyTorch program plus a few flowrate lines.

The same code runs alone, with its weights streamed, or data-parallel:

    python examples/own_loop.py
    python examples/own_loop.py --execution streaming
    torchrun --nproc-per-node 2 examples/own_loop.py
"""

import argparse

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import flowrate


class MLP(nn.Module):
    """A 3-layer classifier; its layers in a `blocks` ModuleList so it can also be streamed."""

    def __init__(self, inputs: int = 256, hidden: int = 512, classes: int = 10) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            [
                nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU()),  # (B, hidden)
                nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU()),  # (B, hidden)
                nn.Linear(hidden, classes),  # (B, classes)
            ]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


parser = argparse.ArgumentParser()
parser.add_argument("--execution", default="resident", choices=["resident", "streaming"])
parser.add_argument("--out", help="write the result as JSON here")
args = parser.parse_args()

torch.manual_seed(0)
inputs, targets = torch.randn(4096, 256), torch.randint(0, 10, (4096,))
loader = DataLoader(TensorDataset(inputs, targets), batch_size=64, shuffle=True)
model = MLP()

# The flowrate lines: a session, then wrap the model, the optimizer and the loader.
with flowrate.session("own-mlp", execution=args.execution, preheat_steps=3, store=False) as s:
    model = s.model(model)
    optimizer = s.optimizer(torch.optim.AdamW(model.parameters(), lr=1e-3))
    for x, y in s.loader(loader):
        loss = F.cross_entropy(model(x), y)
        s.step(loss)  # backward, optimizer step and zero_grad, counted

if s.rank == 0:
    summary = s.result.summary
    print(
        f"own-mlp ({args.execution}, {s.world_size} process(es)): {summary.samples_per_sec:.0f} samples/s, "
        f"{summary.timed_steps} timed steps, final loss {summary.final_loss:.3f}"
    )
    if args.out:
        s.result.save(args.out)
