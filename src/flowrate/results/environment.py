"""The environment section of a record: where and with what a run was measured.

flowrate.measure.env collects it as plain values; ``environment_from`` makes it this typed,
open section (flowrate.results.codec): the keys readers read are named, every other key a record
holds (an older or newer flowrate's, a GPU's NVML readings) is kept in ``extra``, and the section
is written again with the keys it was read with, in their order. A key a record lacks reads as
None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flowrate.results.codec import decode


@dataclass(frozen=True)
class Software:
    """The flowrate that ran: its version and the commit of its checkout (None: not a checkout)."""

    version: str | None = None
    commit: str | None = None
    dirty: bool | None = None
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class PythonInfo:
    version: str | None = None
    implementation: str | None = None
    executable: str | None = None
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class TorchInfo:
    """PyTorch's version, the CUDA and cuDNN it was built with, and its thread pools."""

    version: str | None = None
    cuda: str | None = None
    cudnn: int | None = None
    debug: bool | None = None
    num_threads: int | None = None
    num_interop_threads: int | None = None
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class DeviceInfo:
    """The device that ran: its type ("cpu", "cuda", "mps", "remote" for a served model) and name
    (a CPU's model, a GPU's); a GPU's properties and NVML readings."""

    type: str | None = None
    name: str | None = None
    index: int | None = None
    compute_capability: str | None = None
    memory_bytes: int | None = None
    multiprocessor_count: int | None = None
    driver_version: str | None = None
    power_limit_w: float | None = None  # NVML's enforced power limit (None: not readable)
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class CpuInfo:
    model: str | None = None
    physical_cores: int | None = None
    logical_cores: int | None = None
    architecture: str | None = None
    frequency_mhz: float | None = None
    flags_of_note: list[str] | None = None
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class HostMemory:
    total_bytes: int | None = None
    available_bytes: int | None = None
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class OsInfo:
    system: str | None = None
    release: str | None = None
    platform: str | None = None
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class MachineLoadInfo:
    """The machine's load over the timed window (flowrate.measure.machine_load)."""

    seconds: float | None = None
    cpus: int | None = None
    others_cpus: float | None = None  # other processes' CPU use, in CPUs
    steal_share: float | None = None
    loadavg_1m_start: float | None = None
    loadavg_1m_end: float | None = None
    extra: dict[str, object] = field(default_factory=dict)
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Environment:
    """Everything that may explain a difference between two results (flowrate.measure.env)."""

    flowrate: Software | None = None
    command_line: list[str] | None = None
    python: PythonInfo | None = None
    torch: TorchInfo | None = None
    device: DeviceInfo | None = None
    cpu: CpuInfo | None = None
    memory: HostMemory | None = None
    freed_memory: str | None = None  # what the allocator does with freed host memory
    os: OsInfo | None = None
    hostname: str | None = None
    process_id: int | None = None
    env_vars: dict[str, str] | None = None  # the variables that change performance
    collected_at: str | None = None
    machine_load: MachineLoadInfo | None = None  # None: not read
    client_device: DeviceInfo | None = None  # serve-bench: the machine the load came from
    extra: dict[str, object] = field(default_factory=dict)  # any other key
    written: tuple[str, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def device_name(self) -> str | None:
        return self.device.name if self.device else None

    @property
    def device_type(self) -> str | None:
        return self.device.type if self.device else None

    @property
    def commit(self) -> str | None:
        """The commit of the flowrate checkout that ran (None: not a checkout, or not recorded)."""
        return self.flowrate.commit if self.flowrate else None


def environment_from(data: Mapping[str, Any]) -> Environment:
    """The section from its plain values (flowrate.measure.env.collect_environment's, a record's)."""
    return decode(Environment, data)


def environment_fingerprint(env: Environment) -> dict[str, Any]:
    """The fields that must match for two results to be comparable; absent ones read as None."""
    torch = env.torch or TorchInfo()
    return {
        "device_name": env.device_name,
        "cpu_model": env.cpu.model if env.cpu else None,
        "torch_version": torch.version,
        "cuda_version": torch.cuda,
        "flowrate_version": env.flowrate.version if env.flowrate else None,
        "num_threads": torch.num_threads,
    }
