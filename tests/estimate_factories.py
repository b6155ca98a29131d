"""Device models and calibrations with chosen rates, for tests of the cost model and estimates."""

from __future__ import annotations

import torch
from torch import nn

import flowrate
from flowrate.estimate.calibration import Calibration, machine_fingerprint
from flowrate.estimate.devices import DeviceModel
from flowrate.estimate.overheads import OptimizerCost, Overheads
from flowrate.measure.env import device_name

FLOPS = 100e9  # FLOP/s of every op class and precision
BANDWIDTH = 10e9  # bytes/s at every size
OVERHEAD = 5e-6  # seconds per kernel
# overhead terms of round values, each a different prime number of µs: priced by hand in tests
US = 1e-6
OVERHEADS = Overheads(
    dispatch_s={"matmul": 1 * US, "elementwise": 2 * US, "reduction": 3 * US, "copy": 4 * US, "view": 5 * US},
    autograd_node_s=7 * US,
    module_s=11 * US,
    optimizer={"adamw": OptimizerCost(13 * US, 17 * US, 1e-9)},
    step_s={"train": 19 * US, "infer": 23 * US},
)


def flat_device(
    flops: float = FLOPS,
    bandwidth: float = BANDWIDTH,
    overhead: float = OVERHEAD,
    capacity: float | None = None,
    device_type: str = "cpu",
) -> DeviceModel:
    """One rate per kind of work, whatever the op's size: times are computable by hand."""
    curve = ((1.0, flops),)
    return DeviceModel(
        name="Flat Test Device",
        device_type=device_type,
        flops={"matmul": {"fp32": curve, "bf16": ((1.0, 2 * flops),)}},
        bandwidth=((1.0, bandwidth),),
        launch_overhead_s={"train": overhead, "infer": overhead},
        host_link_bandwidth=bandwidth / 2,
        memory_capacity=capacity,
        basis="chosen for a test",
    )


def cpu_calibration(flops: float = 50e9, bandwidth: float = 20e9, overhead: float = 10e-6) -> Calibration:
    """A calibration of this machine's CPU with round rates (no measuring: tests stay fast)."""
    flat = [(1.0, flops), (1e12, flops)]
    return Calibration(
        device=device_name(torch.device("cpu")),
        device_type="cpu",
        flops={"matmul": {"fp32": flat, "bf16": flat}},
        bandwidth=[(1.0, bandwidth), (1e12, bandwidth)],
        elementwise={},
        optimizer={},
        launch_overhead_s={"train": overhead, "infer": overhead},
        host_link_bandwidth=None,
        threads=torch.get_num_threads(),
        torch_version=torch.__version__,
        measured_at="2026-11-21T00:00:00+00:00",
        memory_capacity=24e9,
        fingerprint=machine_fingerprint(torch.device("cpu")),
    )


class TinyMLP(flowrate.Problem):
    """Linear(8, 16) -> ReLU -> Linear(16, 4), loss = sum of the outputs: four ops to price by hand."""

    name = "tiny_mlp"
    default_batch_size = 2

    def build_model(self) -> nn.Module:
        return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> flowrate.Batch:
        return (torch.randn(batch_size, 8, device=device, generator=generator),)

    def loss(self, model: nn.Module, batch: flowrate.Batch) -> torch.Tensor:
        return model(batch[0]).sum()

    def parameter_count(self) -> int:
        return 8 * 16 + 16 + 16 * 4 + 4

    def forward_flops_per_sample(self) -> int:
        return 2 * (8 * 16 + 16 * 4)

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return list(model)
