"""Host-link kernels: copies between host and device memory, counted in bytes. CUDA only.

- ``h2d`` / ``d2h``: one copy of ``mib`` MiB between host and device: bytes = size. ``duplex``:
  both directions at once on two CUDA streams: bytes = 2 × size (so its bandwidth
  fraction, against the per-direction link peak, can reach 2). Host buffers are pinned
  (``pin_memory=True``, ``non_blocking=True``) by default; ``-O pinned=0`` uses pageable tensors and
  blocking copies, which is what a plain ``.to()`` of an ordinary tensor does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from flowrate.config import Mode
from flowrate.errors import ConfigError
from flowrate.problems.base import Batch, Family
from flowrate.problems.kernels.base import (
    MIB,
    KernelProblem,
    call_count,
    repeat_calls,
    require_flag,
    require_positive,
)


@dataclass(frozen=True)
class HostLinkConfig:
    mib: int
    pinned: int = 1

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        require_positive(self, "mib")
        require_flag(self, "pinned")


_LINK_WORDS = {
    "h2d": "the host-to-device link",
    "d2h": "the device-to-host link",
    "duplex": "both directions of the host link at once",
}


class HostLink(KernelProblem):
    """Copies of ``mib`` MiB over the host link: h2d, d2h, or duplex (both at once, two streams).

    Pinned buffers copy with non_blocking=True (asynchronous DMA); pageable ones with blocking
    copies, as a plain ``.to()`` of an ordinary tensor does (the driver stages them through its own
    pinned buffer). In duplex, the side stream carries the device-to-host copies: it waits for the
    current stream at the start of a step and the current stream waits for it at the end, so the
    step's value is ordered after both directions' copies.
    """

    config: HostLinkConfig
    bandwidth_kind = "host_link"  # compared with the datasheet host link bandwidth, per direction

    def __init__(self, config: HostLinkConfig, direction: str) -> None:
        super().__init__(config)
        self.name = direction
        self._side_streams: dict[torch.device, torch.cuda.Stream] = {}

    @property
    def pinned(self) -> bool:
        return bool(self.config.pinned)

    def _elements(self) -> int:
        return self.config.mib * MIB // self.element_size

    def _host_buffer(self, device_data: torch.Tensor | None) -> torch.Tensor:
        # zeros / copy_ touch every page now, so no page faults land in the timed loop
        host = torch.zeros(self._elements(), dtype=self.dtype, pin_memory=self.pinned)
        if device_data is not None:
            host.copy_(device_data)
        return host

    def make_batch(self, batch_size: int, device: torch.device, generator: torch.Generator) -> Batch:
        if device.type != "cuda":
            raise ConfigError(
                "device",
                f"{self.name} measures {_LINK_WORDS[self.name]} and needs a CUDA device; use --device cuda",
            )
        shape = (self._elements(),)
        if self.name == "h2d":
            host_src = self._host_buffer(self._randn(shape, device, generator))
            return host_src, torch.zeros(shape, dtype=self.dtype, device=device), call_count(batch_size)
        if self.name == "d2h":
            return self._randn(shape, device, generator), self._host_buffer(None), call_count(batch_size)
        host_src = self._host_buffer(self._randn(shape, device, generator))
        device_dst = torch.zeros(shape, dtype=self.dtype, device=device)
        device_src = self._randn(shape, device, generator)
        return host_src, device_dst, device_src, self._host_buffer(None), call_count(batch_size)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        blocking = not self.pinned
        if self.name == "h2d":
            host_src, device_dst, calls = batch
            repeat_calls(calls, lambda: device_dst.copy_(host_src, non_blocking=not blocking))
            return device_dst[0]
        if self.name == "d2h":
            device_src, host_dst, calls = batch
            repeat_calls(calls, lambda: host_dst.copy_(device_src, non_blocking=not blocking))
            return device_src[0]  # a device element: ordered on the stream, and finite
        host_src, device_dst, device_src, host_dst, calls = batch
        current = torch.cuda.current_stream(device_dst.device)
        side = self._side_stream(device_dst.device)
        side.wait_stream(current)
        repeat_calls(calls, lambda: device_dst.copy_(host_src, non_blocking=not blocking))
        with torch.cuda.stream(side):
            repeat_calls(calls, lambda: host_dst.copy_(device_src, non_blocking=not blocking))
        current.wait_stream(side)
        return device_dst[0]

    def _side_stream(self, device: torch.device) -> torch.cuda.Stream:
        if device not in self._side_streams:
            self._side_streams[device] = torch.cuda.Stream(device=device)
        return self._side_streams[device]

    def forward_flops_per_sample(self) -> int:
        return 0  # memory-bound: see bytes_per_sample

    def bytes_per_sample(self, mode: Mode) -> int | None:
        size = self.config.mib * MIB
        return 2 * size if self.name == "duplex" else size


def _host_link_family(direction: str, summary: str) -> Family:
    return Family(
        name=direction,
        summary=summary,
        sizes={
            "default": HostLinkConfig(mib=256),
            "debug": HostLinkConfig(mib=1),
            "large": HostLinkConfig(mib=1024),
        },
        default_size="default",
        build=lambda config: HostLink(config, direction),
        options=("mib", "pinned"),
    )


FAMILIES: tuple[Family, ...] = (
    _host_link_family("h2d", "kernel: host-to-device copy of mib MiB (pinned=1 by default); CUDA only"),
    _host_link_family("d2h", "kernel: device-to-host copy of mib MiB (pinned=1 by default); CUDA only"),
    _host_link_family(
        "duplex", "kernel: host-to-device and device-to-host copies at once, two streams; CUDA only"
    ),
)
