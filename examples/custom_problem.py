"""A user's own problem: a small convolutional classifier for 28x28 grey images.

Benchmark it from the command line:

    flowrate run --problem examples/custom_problem.py:make_problem --steps 20

or from Python: see examples/api_benchmark.py.
"""

import torch
from torch import nn
from torch.nn import functional as F

import flowrate


class SmallConvNet(flowrate.Problem):
    name = "small_convnet"
    default_batch_size = 32

    def __init__(self, channels: int = 16, classes: int = 10) -> None:
        self.channels = channels
        self.classes = classes

    def build_model(self) -> nn.Module:
        c = self.channels
        return nn.Sequential(
            nn.Sequential(nn.Conv2d(1, c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)),  # (B, c, 14, 14)
            nn.Sequential(nn.Conv2d(c, 2 * c, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)),  # (B, 2c, 7, 7)
            nn.Sequential(nn.Flatten(), nn.Linear(2 * c * 7 * 7, self.classes)),  # (B, classes)
        )

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> flowrate.Batch:
        images = torch.rand(batch_size, 1, 28, 28, device=device, generator=generator)
        labels = torch.randint(0, self.classes, (batch_size,), device=device, generator=generator)
        return images, labels

    def loss(self, model: nn.Module, batch: flowrate.Batch) -> torch.Tensor:
        images, labels = batch
        first = next(model.parameters())
        return F.cross_entropy(model(images.to(first.dtype)).float(), labels)

    def parameter_count(self) -> int:
        c = self.channels
        return (9 * c + c) + (9 * c * 2 * c + 2 * c) + (2 * c * 49 * self.classes + self.classes)

    def forward_flops_per_sample(self) -> int:
        # 2 FLOPs per multiply-add: conv = 2 * k*k * C_in * C_out * H_out * W_out
        c = self.channels
        return 2 * (9 * 1 * c * 28 * 28 + 9 * c * 2 * c * 14 * 14 + 2 * c * 49 * self.classes)

    def train_flops_per_sample(self) -> int:
        # the first conv needs no gradient with respect to the images
        return 3 * self.forward_flops_per_sample() - 2 * 9 * 1 * self.channels * 28 * 28

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return list(model.children())


def make_problem() -> flowrate.Problem:
    return SmallConvNet()
